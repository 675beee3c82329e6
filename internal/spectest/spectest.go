// Package spectest validates HTTP traffic against Daytona's published
// API specification files, so that tests can prove that agentbox's servers
// and clients stay wire-compatible with Daytona.
//
// The specification files are never copied into this module; they are read
// from the folder named by the environment variable AGENTBOX_DAYTONA_SPEC_DIR
// or, by default, from ../shared/daytona-api beside the module root (the
// folder holding go.mod). Tests that need them skip when the default folder
// is missing and the variable unset, as in a plain clone of the module,
// and fail instead under AGENTBOX_REQUIRE_ALL=1 (see Dir). Load and New
// read two documents:
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
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
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
