// The checks of answers beyond what openapi3filter does: agentbox's binary
// exec extension, error bodies the documents do not declare, multipart
// bulk downloads and plain-text bodies.

package spectest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/getkin/kin-openapi/openapi3"
)

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
