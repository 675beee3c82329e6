// Package spectest validates HTTP traffic against Daytona's published
// API specification files, so that tests can prove that agentbox's servers
// and clients stay wire-compatible with Daytona.
//
// The specification files are never copied into this module; they are read
// from the folder named by the environment variable AGENTBOX_DAYTONA_SPEC_DIR
// or, by default, from ../shared/daytona-api beside the module root (the
// folder holding go.mod). Load and New read two documents:
//
//   - toolbox.json: the toolbox API as Daytona's cloud serves it today
//     (Swagger 2.0, converted to OpenAPI 3 with openapi2conv);
//   - daytonaio-daytona-v0.190.0/libs/toolbox-api-client-go/api/openapi.yaml:
//     the older open-source daemon, which still has POST /files/upload.
//
// LoadControlPlane and NewControlPlane do the same for the control-plane
// API (api.json and the v0.190.0 control plane, which still proxies toolbox
// routes under /toolbox/{sandboxId}/toolbox/…).
//
// A request or response is valid when one of the documents has an operation
// for its method and path and the traffic passes that document's checks.
// Headers the documents do not declare (such as the X-Agentbox-* protocol
// extension headers) are allowed; security requirements are ignored (the
// caller's authentication is its own business); a response that switches
// protocols (101, a WebSocket upgrade) is not validated further. A JSON
// error answering an operation whose Swagger 2.0 "produces" lists only a
// binary type (GET /files/download) is checked against the error schema
// the document gives it, since Daytona's daemon sends errors as JSON.
//
// One agentbox protocol extension changes the shape of an answer: a
// synchronous POST /process/session/{sessionId}/exec whose request opts in
// to the binary extension (X-Agentbox-Use: binary) may be answered with the
// raw output (Content-Type application/octet-stream, the exit code and
// byte counts in X-Agentbox-* headers; see docs/protocol.md). Such an
// answer is accepted for that operation and for opted-in requests only,
// and checked against the extension's rules instead: status 200, the
// headers present and well formed, the body exactly as long as they say.
// A binary answer anywhere else fails as the documents make it fail.
//
// Tests that send malformed requests on purpose use ResponsesOnly, which
// skips request checks and holds error statuses the documents do not
// declare (413, an unknown route's 404) to the ErrorResponse schema;
// tests that move large bodies use SkipBodiesOver.
//
// The control-plane documents declare no error at all (no operation lists
// an error status; there is no ErrorResponse schema): a Validator of
// NewControlPlane checks every undeclared error status, ResponsesOnly or
// not, against the body Daytona's API sends, {statusCode, error, message,
// path, timestamp}.
//
// A test validates every exchange of a server it starts, on both sides:
//
//	v := spectest.Load(t)
//	srv := httptest.NewServer(v.Handler(t, daemon)) // server side
//	defer srv.Close()
//	client := &http.Client{Transport: v.Transport(t, srv.Client().Transport)} // client side
//	resp, err := client.Get(srv.URL + "/version")
package spectest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// EnvSpecDir names the environment variable that overrides the folder
// holding Daytona's specification files.
const EnvSpecDir = "AGENTBOX_DAYTONA_SPEC_DIR"

// Spec files, relative to the spec folder.
const (
	// ToolboxSpec is the current toolbox API (Swagger 2.0).
	ToolboxSpec = "toolbox.json"
	// DaemonSpec is the toolbox API of the v0.190.0 open-source daemon.
	DaemonSpec = "daytonaio-daytona-v0.190.0/libs/toolbox-api-client-go/api/openapi.yaml"
	// ControlPlaneSpec is the current control-plane API (OpenAPI 3.0).
	ControlPlaneSpec = "api.json"
	// OldControlPlaneSpec is the v0.190.0 control-plane API, which still
	// has the API-proxied toolbox routes /toolbox/{sandboxId}/toolbox/….
	OldControlPlaneSpec = "daytonaio-daytona-v0.190.0/libs/api-client-go/api/openapi.yaml"
)

// ErrNoRoute is matched (errors.Is) by the error for a request whose method
// and path no loaded document describes.
var ErrNoRoute = errors.New("no operation in the Daytona specs")

// Validator checks requests and responses against the loaded documents. It
// is immutable and safe for concurrent use; share one between tests.
type Validator struct {
	specs         []*spec
	basePath      string
	responsesOnly bool
	// errorShape is the schema of errors the documents do not declare,
	// checked whatever responsesOnly says; nil: such errors fail unless
	// responsesOnly, which checks them against ErrorResponse.
	errorShape *openapi3.Schema
	maxBody    int64 // > 0: bodies above this size are not checked
}

type spec struct {
	name   string
	doc    *openapi3.T
	router routers.Router
}

// SpecDir returns the folder holding Daytona's specification files: the
// value of AGENTBOX_DAYTONA_SPEC_DIR, or ../shared/daytona-api relative to
// the module root found by walking up from the working directory to go.mod.
// It fails when the folder does not exist, saying how to provide it.
func SpecDir() (string, error) {
	if dir := os.Getenv(EnvSpecDir); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, ToolboxSpec)); err != nil {
			return "", fmt.Errorf("spectest: %s=%q does not hold the Daytona spec files: %w", EnvSpecDir, dir, err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("spectest: %w", err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("spectest: no go.mod above %s; set %s to the folder holding the Daytona spec files (toolbox.json)", wd, EnvSpecDir)
		}
		root = parent
	}
	dir := filepath.Join(root, "..", "shared", "daytona-api")
	if _, err := os.Stat(filepath.Join(dir, ToolboxSpec)); err != nil {
		return "", fmt.Errorf("spectest: Daytona spec files not found in %s (the default, ../shared/daytona-api beside the module root): %w; check them out there or set %s", filepath.Clean(dir), err, EnvSpecDir)
	}
	return filepath.Clean(dir), nil
}

// cache keeps one Validator per spec folder and API for the life of the
// test process, so that many tests share one load and conversion.
var cache struct {
	sync.Mutex
	byKey map[string]*Validator
}

// Load returns a Validator of the toolbox API (see New) for the spec folder
// given by SpecDir, failing the test (never skipping it) when the files are
// missing or do not load. The documents are loaded once per process and
// shared.
func Load(t testing.TB) *Validator {
	t.Helper()
	return load(t, "toolbox", New)
}

// LoadControlPlane is Load for the control-plane API (see NewControlPlane).
func LoadControlPlane(t testing.TB) *Validator {
	t.Helper()
	return load(t, "control-plane", NewControlPlane)
}

func load(t testing.TB, kind string, build func(dir string) (*Validator, error)) *Validator {
	t.Helper()
	dir, err := SpecDir()
	if err != nil {
		t.Fatal(err)
	}
	key := kind + "\x00" + dir
	cache.Lock()
	defer cache.Unlock()
	if v := cache.byKey[key]; v != nil {
		return v
	}
	v, err := build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cache.byKey == nil {
		cache.byKey = make(map[string]*Validator)
	}
	cache.byKey[key] = v
	return v
}

// New loads the toolbox documents (ToolboxSpec and DaemonSpec) from dir and
// returns a new Validator.
func New(dir string) (*Validator, error) {
	return newValidator(dir, toolboxSpecs)
}

// NewControlPlane loads the control-plane documents (ControlPlaneSpec and
// OldControlPlaneSpec) from dir and returns a new Validator. Their paths
// start after the API base URL, which already ends in /api: combine with
// WithBasePath("/api") for a server that serves them there.
func NewControlPlane(dir string) (*Validator, error) {
	v, err := newValidator(dir, controlPlaneSpecs)
	if err != nil {
		return nil, err
	}
	v.errorShape = controlPlaneError()
	return v, nil
}

// controlPlaneError is the schema of the control plane's errors, which
// its documents declare nowhere (no operation lists an error status, and
// there is no ErrorResponse schema): the body Daytona's NestJS API sends,
// {statusCode, error, message, path, timestamp}, error being the HTTP
// reason phrase (see reference/daytona-api.md §4).
func controlPlaneError() *openapi3.Schema {
	str := openapi3.NewStringSchema().NewRef()
	return openapi3.NewObjectSchema().
		WithProperty("statusCode", openapi3.NewIntegerSchema()).
		WithPropertyRef("error", str).
		WithPropertyRef("message", str).
		WithPropertyRef("path", str).
		WithPropertyRef("timestamp", str).
		WithRequired([]string{"statusCode", "error", "message", "path", "timestamp"})
}

type specFile struct {
	name     string
	swagger2 bool
	// lenient skips checking the document itself: api.json has paths
	// that differ only in a parameter's name, which OpenAPI forbids.
	lenient bool
}

var (
	toolboxSpecs      = []specFile{{ToolboxSpec, true, false}, {DaemonSpec, false, false}}
	controlPlaneSpecs = []specFile{{ControlPlaneSpec, false, true}, {OldControlPlaneSpec, false, true}}
)

func newValidator(dir string, files []specFile) (*Validator, error) {
	v := &Validator{}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		var doc *openapi3.T
		var err error
		if f.swagger2 {
			doc, err = loadSwagger2(path)
		} else {
			doc, err = loadOpenAPI3(path)
		}
		if err != nil {
			return nil, err
		}
		// Match any host: clients reach the server under arbitrary names
		// (a unix socket, a proxy); a base path is handled by WithBasePath.
		doc.Servers = openapi3.Servers{{URL: "/"}}
		allowDaytonaNulls(doc)
		if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil && !f.lenient {
			return nil, fmt.Errorf("spectest: %s is not a valid OpenAPI document: %w", f.name, err)
		}
		r, err := gorillamux.NewRouter(doc)
		if err != nil {
			return nil, fmt.Errorf("spectest: routing %s: %w", f.name, err)
		}
		v.specs = append(v.specs, &spec{name: f.name, doc: doc, router: r})
	}
	return v, nil
}

// daytonaNulls lists the schema properties that Daytona's daemon sends as
// an explicit null although its documents do not say they may be null
// (their generator leaves x-nullable out): every field but cmdId of an
// async session exec's answer, and stdout and stderr of a sync answer to
// an SDK older than 0.167.0. SDKs read these answers, so servers that
// match Daytona send the nulls too, and the documents are read as allowing
// them.
var daytonaNulls = map[string][]string{
	"SessionExecuteResponse": {"output", "stdout", "stderr", "exitCode"},
}

// allowDaytonaNulls marks the properties of daytonaNulls nullable in doc.
func allowDaytonaNulls(doc *openapi3.T) {
	if doc.Components == nil {
		return
	}
	for name, props := range daytonaNulls {
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			continue
		}
		for _, p := range props {
			if pr := ref.Value.Properties[p]; pr != nil && pr.Value != nil {
				pr.Value.Nullable = true
			}
		}
	}
}

func loadSwagger2(path string) (*openapi3.T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spectest: reading Daytona spec: %w (set %s to the folder holding it)", err, EnvSpecDir)
	}
	var doc2 openapi2.T
	if err := doc2.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("spectest: parsing %s: %w", path, err)
	}
	doc3, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		return nil, fmt.Errorf("spectest: converting %s to OpenAPI 3: %w", path, err)
	}
	return doc3, nil
}

func loadOpenAPI3(path string) (*openapi3.T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spectest: reading Daytona spec: %w (set %s to the folder holding it)", err, EnvSpecDir)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("spectest: parsing %s: %w", path, err)
	}
	return doc, nil
}

// WithBasePath returns a Validator that expects every path to start with
// prefix (e.g. "/toolbox/{id}" behind a proxy, written out as the real id)
// and strips it before matching. Paths without the prefix fail validation.
func (v *Validator) WithBasePath(prefix string) *Validator {
	c := *v
	c.basePath = strings.TrimSuffix(prefix, "/")
	return &c
}

// ResponsesOnly returns a Validator whose Handler and Transport check only
// responses: use it for tests that send malformed requests on purpose and
// want the server's answers checked all the same. Its ValidateResponse (and
// so its Handler and Transport) also accepts an error status (400 or
// above) that the operation does not declare, or a request that no
// document routes, provided the body is JSON matching the ErrorResponse
// schema of a loaded document: the shape every Daytona error has.
// ValidateRequest still checks requests when called directly.
func (v *Validator) ResponsesOnly() *Validator {
	c := *v
	c.responsesOnly = true
	return &c
}

// SkipBodiesOver returns a Validator that does not check request or
// response bodies larger than n bytes (their status, headers and media
// type still are), and whose Handler keeps no more than n+1 bytes of a
// response: for tests that move large bodies. n <= 0 checks every body.
func (v *Validator) SkipBodiesOver(n int64) *Validator {
	c := *v
	c.maxBody = n
	return &c
}

// Specs returns the names of the loaded documents.
func (v *Validator) Specs() []string {
	names := make([]string, len(v.specs))
	for i, s := range v.specs {
		names[i] = s.name
	}
	return names
}

func options() *openapi3filter.Options {
	o := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
		SkipSettingDefaults:   true,
	}
	o.WithCustomSchemaErrorFunc(schemaError)
	return o
}

// schemaError words a schema violation in one line: where and why, without
// the schema and value dumps of the default message.
func schemaError(err *openapi3.SchemaError) string {
	reason := err.Reason
	if err.Origin != nil {
		reason = err.Origin.Error()
	}
	if reason == "" {
		return "" // the default message
	}
	return fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), reason)
}

// routed is a request matched to an operation of one document.
type routed struct {
	spec   *spec
	route  *routers.Route
	params map[string]string
}

// routes finds the operation for r in every document.
func (v *Validator) routes(r *http.Request) ([]routed, *http.Request, error) {
	u := *r.URL
	if v.basePath != "" {
		rest, ok := strings.CutPrefix(u.Path, v.basePath)
		if !ok || (rest != "" && rest[0] != '/') {
			return nil, nil, fmt.Errorf("%w: %s %s is not under the base path %s", ErrNoRoute, r.Method, r.URL.Path, v.basePath)
		}
		u.Path = rest
		u.RawPath = ""
		if raw, ok := strings.CutPrefix(r.URL.EscapedPath(), v.basePath); ok {
			u.RawPath = raw
		}
	}
	rr := r.Clone(r.Context())
	rr.URL = &u
	var out []routed
	for _, s := range v.specs {
		route, params, err := s.router.FindRoute(rr)
		if err != nil {
			continue
		}
		out = append(out, routed{spec: s, route: route, params: params})
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("%w: %s %s (looked in %s)", ErrNoRoute, r.Method, u.Path, strings.Join(v.Specs(), ", "))
	}
	return out, rr, nil
}

// ValidateRequest checks r against the documents. r's body is read and put
// back, so r can still be served or sent afterwards.
func (v *Validator) ValidateRequest(r *http.Request) error {
	body, err := bufferRequestBody(r)
	if err != nil {
		return err
	}
	matches, rr, err := v.routes(r)
	if err != nil {
		return err
	}
	opts := options()
	if v.tooBig(int64(len(body))) {
		opts.ExcludeRequestBody = true
	}
	var errs []error
	for _, m := range matches {
		rr.Body = io.NopCloser(bytes.NewReader(body))
		in := &openapi3filter.RequestValidationInput{
			Request:    rr,
			PathParams: m.params,
			Route:      m.route,
			Options:    opts,
		}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.spec.name, err))
			continue
		}
		return nil
	}
	return fmt.Errorf("spectest: request %s %s: %w", r.Method, r.URL.Path, errors.Join(errs...))
}

// ValidateResponse checks resp, the answer to req, against the documents.
// resp's body is read and put back. A 101 (Switching Protocols) response is
// accepted as is; so is a 401 where the operation documents none, since
// authentication is the caller's own.
func (v *Validator) ValidateResponse(req *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return nil
	}
	body, err := bufferResponseBody(resp)
	if err != nil {
		return err
	}
	return v.validateResponse(req, resp, body, v.tooBig(int64(len(body))))
}

// tooBig reports whether a body of n bytes is above the SkipBodiesOver
// limit.
func (v *Validator) tooBig(n int64) bool { return v.maxBody > 0 && n > v.maxBody }

// validateResponse checks resp, whose body has been read into body;
// skipBody leaves the body unchecked.
func (v *Validator) validateResponse(req *http.Request, resp *http.Response, body []byte, skipBody bool) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return nil
	}
	if handled, err := v.checkBinaryExec(req, resp, body, skipBody); handled {
		return err
	}
	lenientError := (v.responsesOnly || v.errorShape != nil) && resp.StatusCode >= 400
	matches, rr, err := v.routes(req)
	if err != nil {
		if lenientError && errors.Is(err, ErrNoRoute) {
			return v.checkErrorShape(req, resp, body, skipBody)
		}
		return err
	}
	var errs []error
	undeclared := 0
	for _, m := range matches {
		responses := m.route.Operation.Responses
		if resp.StatusCode == http.StatusUnauthorized && responses.Status(http.StatusUnauthorized) == nil {
			return nil
		}
		if lenientError && responses.Status(resp.StatusCode) == nil && responses.Default() == nil {
			undeclared++
			continue
		}
		opts := options()
		if schema := jsonErrorSchema(responses, resp); schema != nil {
			if err := checkJSON(schema, body, skipBody); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.spec.name, err))
				continue
			}
			return nil
		}
		if handled, err := v.checkBulkParts(responses, resp, body, skipBody); handled {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.spec.name, err))
				continue
			}
			return nil
		}
		if skipBody || skipTextBody(responses, resp) {
			opts.ExcludeResponseBody = true
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request:    rr,
				PathParams: m.params,
				Route:      m.route,
				Options:    opts,
			},
			Status:  resp.StatusCode,
			Header:  resp.Header,
			Body:    io.NopCloser(bytes.NewReader(body)),
			Options: opts,
		}
		if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.spec.name, err))
			continue
		}
		return nil
	}
	if undeclared == len(matches) {
		return v.checkErrorShape(req, resp, body, skipBody)
	}
	return fmt.Errorf("spectest: response %d to %s %s: %w", resp.StatusCode, req.Method, req.URL.Path, errors.Join(errs...))
}

// binaryExecPath is the operation that agentbox's binary extension
// answers with raw output.
const binaryExecPath = "/process/session/{sessionId}/exec"

// checkBinaryExec checks resp when it is a binary exec answer of the
// agentbox binary extension to a sync session exec (see the package
// documentation), and reports whether it was one. Other answers, binary
// ones to other operations among them, are left to the documents.
func (v *Validator) checkBinaryExec(req *http.Request, resp *http.Response, body []byte, skipBody bool) (bool, error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != toolbox.ContentTypeBinary || req.Method != http.MethodPost {
		return false, nil
	}
	matches, _, err := v.routes(req)
	if err != nil || !slices.ContainsFunc(matches, func(m routed) bool { return m.route.Path == binaryExecPath }) {
		return false, nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("spectest: response %d to %s %s (a binary exec answer of the agentbox extension %q): %s",
			resp.StatusCode, req.Method, req.URL.Path, toolbox.ExtBinary, fmt.Sprintf(format, args...))
	}
	if !toolbox.Uses(req.Header, toolbox.ExtBinary) {
		return true, fail("the request did not opt in with %s: %s, so the answer must be Daytona's JSON", toolbox.HeaderUseExtensions, toolbox.ExtBinary)
	}
	if resp.StatusCode != http.StatusOK {
		return true, fail("status %d, want 200 (errors stay JSON)", resp.StatusCode)
	}
	h := resp.Header
	if h.Get(toolbox.HeaderCommandID) == "" {
		return true, fail("no %s", toolbox.HeaderCommandID)
	}
	if _, err := strconv.Atoi(h.Get(toolbox.HeaderExitCode)); err != nil {
		return true, fail("%s %q is not an integer", toolbox.HeaderExitCode, h.Get(toolbox.HeaderExitCode))
	}
	var total int64
	for _, name := range []string{toolbox.HeaderStdoutBytes, toolbox.HeaderStderrBytes, toolbox.HeaderStdoutDropped, toolbox.HeaderStderrDropped} {
		n, err := strconv.ParseInt(h.Get(name), 10, 64)
		if err != nil || n < 0 {
			return true, fail("%s %q is not a byte count", name, h.Get(name))
		}
		if name == toolbox.HeaderStdoutBytes || name == toolbox.HeaderStderrBytes {
			total += n
		}
	}
	if !skipBody && int64(len(body)) != total {
		return true, fail("the body holds %d bytes, the headers say %d", len(body), total)
	}
	return true, nil
}

// checkErrorShape checks that resp carries a JSON body matching the
// ErrorResponse schema of one of the documents: the fallback of a
// ResponsesOnly Validator for errors the documents do not declare.
func (v *Validator) checkErrorShape(req *http.Request, resp *http.Response, body []byte, skipBody bool) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("spectest: response %d to %s %s (no declared response; checked as an ErrorResponse): %s",
			resp.StatusCode, req.Method, req.URL.Path, fmt.Sprintf(format, args...))
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return fail("Content-Type %q, want application/json", resp.Header.Get("Content-Type"))
	}
	if v.errorShape != nil {
		if err := checkJSON(v.errorShape, body, skipBody); err != nil {
			return fail("%v", err)
		}
		return nil
	}
	var errs []error
	for _, s := range v.specs {
		if s.doc.Components == nil {
			continue
		}
		ref := s.doc.Components.Schemas["ErrorResponse"]
		if ref == nil || ref.Value == nil {
			continue
		}
		if err := checkJSON(ref.Value, body, skipBody); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			continue
		}
		return nil
	}
	if len(errs) == 0 {
		return fail("no loaded document (%s) has an ErrorResponse schema", strings.Join(v.Specs(), ", "))
	}
	return fail("%v", errors.Join(errs...))
}

// jsonErrorSchema returns the schema to check resp against when resp is a
// JSON error (status 400 or above) answering an operation whose Swagger 2.0
// "produces" names only a non-JSON media type (GET /files/download
// produces application/octet-stream): the conversion files the error's
// object schema (ErrorResponse) under that media type, although Daytona's
// daemon, like ours, sends its errors as JSON. Otherwise it returns nil.
func jsonErrorSchema(responses *openapi3.Responses, resp *http.Response) *openapi3.Schema {
	if resp.StatusCode < 400 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil
	}
	ref := responses.Status(resp.StatusCode)
	if ref == nil || ref.Value == nil || len(ref.Value.Content) == 0 {
		return nil
	}
	var schema *openapi3.Schema
	for name, c := range ref.Value.Content {
		if strings.Contains(name, "json") || name == "*/*" {
			return nil // JSON is declared: validate as usual
		}
		if c.Schema != nil && c.Schema.Value != nil && c.Schema.Value.Type.Is(openapi3.TypeObject) {
			schema = c.Schema.Value
		}
	}
	return schema
}

// checkJSON checks that body is JSON matching schema (only that it is
// JSON when skipBody is set, and not even that when the body is large).
func checkJSON(schema *openapi3.Schema, body []byte, skipBody bool) error {
	if skipBody {
		return nil
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	if err := schema.VisitJSON(value); err != nil {
		return fmt.Errorf("body does not match the declared schema: %w", err)
	}
	return nil
}

// checkBulkParts checks resp when it is multipart/form-data answering an
// operation that declares a free-form object (no properties) for it, and
// reports whether it was such an answer. POST /files/bulk-download does
// (gin.H), and its description names the parts: "file" for each file
// sent, "error" with an ErrorResponse JSON body for each that failed. The
// OpenAPI library cannot check such a body (it looks every part's name up
// among the schema's properties), so this does: the body must be a
// complete multipart body whose every part is named file or error, each
// file part with a filename, each error part an ErrorResponse (of the
// first loaded document that has the schema).
func (v *Validator) checkBulkParts(responses *openapi3.Responses, resp *http.Response, body []byte, skipBody bool) (bool, error) {
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return false, nil
	}
	ref := responses.Status(resp.StatusCode)
	if ref == nil || ref.Value == nil {
		return false, nil
	}
	c := ref.Value.Content.Get(mt)
	if c == nil || c.Schema == nil || c.Schema.Value == nil || !c.Schema.Value.Type.Is(openapi3.TypeObject) || len(c.Schema.Value.Properties) > 0 {
		return false, nil
	}
	if params["boundary"] == "" {
		return true, errors.New("multipart answer without a boundary")
	}
	if skipBody {
		return true, nil
	}
	var errSchema *openapi3.Schema
	for _, s := range v.specs {
		if s.doc.Components != nil && s.doc.Components.Schemas["ErrorResponse"] != nil {
			errSchema = s.doc.Components.Schemas["ErrorResponse"].Value
			break
		}
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for i := 0; ; i++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return true, fmt.Errorf("part %d: %w", i, err)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return true, fmt.Errorf("part %d: %w", i, err)
		}
		switch p.FormName() {
		case "file":
			if p.FileName() == "" {
				return true, fmt.Errorf("part %d (file) has no filename", i)
			}
		case "error":
			if errSchema != nil {
				if err := checkJSON(errSchema, data, false); err != nil {
					return true, fmt.Errorf("part %d (error): %w", i, err)
				}
			}
		default:
			return true, fmt.Errorf("part %d is named %q, want file or error", i, p.FormName())
		}
	}
}

// skipTextBody reports whether resp is plain text answering an operation
// whose Swagger 2.0 "produces" listed text/plain beside JSON: the
// conversion gives both media types the JSON object schema, which no text
// can match, so only the media type is checked.
func skipTextBody(responses *openapi3.Responses, resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "text/") {
		return false
	}
	ref := responses.Status(resp.StatusCode)
	if ref == nil {
		ref = responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return false
	}
	c := ref.Value.Content.Get(mt)
	if c == nil || c.Schema == nil || c.Schema.Value == nil {
		return false
	}
	return !c.Schema.Value.Type.Is(openapi3.TypeString)
}

func bufferRequestBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("spectest: reading request body: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return body, nil
}

func bufferResponseBody(resp *http.Response) ([]byte, error) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("spectest: reading response body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// Handler returns middleware that validates every request reaching next and
// every response next writes, reporting failures with t.Errorf. Responses
// still stream to the client as next writes them (a copy is kept for the
// check); hijacked connections (WebSocket) are checked up to the upgrade.
// A handler that returns without writing anything after its client went
// away (the request's context is done) is not checked: nobody received an
// answer.
func (v *Validator) Handler(t testing.TB, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !v.responsesOnly {
			if err := v.ValidateRequest(r); err != nil {
				t.Errorf("%v", err)
			}
		}
		// Keep what the validator needs before the handler consumes r.
		vr := r.Clone(r.Context())
		vr.Body = nil
		rec := &recorder{w: w, max: v.maxBody}
		next.ServeHTTP(rec, r)
		if rec.hijacked {
			return
		}
		if rec.status == 0 && r.Context().Err() != nil {
			// The client went away and the handler gave up without
			// answering: no response reached anyone.
			return
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		header := rec.header
		if header == nil {
			header = w.Header().Clone()
		}
		resp := &http.Response{StatusCode: status, Header: header, Body: http.NoBody}
		if err := v.validateResponse(vr, resp, rec.body.Bytes(), rec.overflow); err != nil {
			t.Errorf("%v", err)
		}
	})
}

// ServerHandler returns middleware that validates the exchanges of a
// Daytona-compatible server such as agentbox serve: toolbox requests
// proxied at /toolbox/{sandboxId}/… with tb (which sees them with that
// prefix stripped), every other request with cp (a control-plane
// Validator, WithBasePath("/api") for a server with the API there) but
// the Socket.IO event stream (a path ending in /socket.io/) and preview
// requests (a host of the form {port}-{…}.{domain}, Daytona's preview
// URLs), which no document describes and which pass unchecked.
func ServerHandler(t testing.TB, cp, tb *Validator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/socket.io/") || previewHost.MatchString(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		if rest, ok := strings.CutPrefix(r.URL.Path, "/toolbox/"); ok {
			id, _, _ := strings.Cut(rest, "/")
			tb.WithBasePath("/toolbox/"+id).Handler(t, next).ServeHTTP(w, r)
			return
		}
		cp.Handler(t, next).ServeHTTP(w, r)
	})
}

// previewHost matches the host of a Daytona preview URL.
var previewHost = regexp.MustCompile(`^[0-9]+-[^.]+\.`)

// recorder passes a response through while keeping a copy.
type recorder struct {
	w        http.ResponseWriter
	status   int
	header   http.Header
	body     bytes.Buffer
	max      int64 // > 0: keep at most max+1 bytes
	overflow bool  // more than max bytes were written
	hijacked bool
}

func (rec *recorder) Header() http.Header { return rec.w.Header() }

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 || rec.status < 200 {
		rec.status = code
		rec.header = rec.w.Header().Clone()
	}
	rec.w.WriteHeader(code)
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	switch {
	case rec.max <= 0:
		rec.body.Write(p)
	case !rec.overflow:
		room := rec.max + 1 - int64(rec.body.Len())
		rec.body.Write(p[:min(int64(len(p)), room)])
		rec.overflow = int64(rec.body.Len()) > rec.max
	}
	return rec.w.Write(p)
}

// Flush implements http.Flusher.
func (rec *recorder) Flush() {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(rec.w).Flush()
}

// Hijack implements http.Hijacker; the hijacked exchange is not validated.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	rec.hijacked = true
	return http.NewResponseController(rec.w).Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// Transport returns a RoundTripper that sends each request through base
// (http.DefaultTransport when nil) and validates the request and its
// response, reporting failures with t.Errorf. Responses other than 101 are
// read completely before RoundTrip returns.
func (v *Validator) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{v: v, t: t, base: base}
}

type transport struct {
	v    *Validator
	t    testing.TB
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// RoundTrip must not modify req: send a clone with a buffered body.
	out := req.Clone(req.Context())
	if tr.v.responsesOnly {
		// Still buffer the body, so that out owns a copy.
		if _, err := bufferRequestBody(out); err != nil {
			return nil, err
		}
	} else if err := tr.v.ValidateRequest(out); err != nil {
		tr.t.Errorf("%v", err)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	vr := out.Clone(out.Context())
	resp, err := tr.base.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, nil
	}
	vr.Body = nil
	if err := tr.v.ValidateResponse(vr, resp); err != nil {
		tr.t.Errorf("%v", err)
	}
	return resp, nil
}

// Routes lists "METHOD /path" for every operation of every document, in
// sorted order without duplicates; useful to report coverage.
func (v *Validator) Routes() []string {
	var out []string
	for _, s := range v.specs {
		for path, item := range s.doc.Paths.Map() {
			for method := range item.Operations() {
				out = append(out, method+" "+path)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
