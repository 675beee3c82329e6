package toolbox

import (
	"github.com/agentbox-dev/agentbox/internal/errbody"
	"github.com/agentbox-dev/agentbox/internal/redact"

	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// maxErrorMessage is how long a message may be in Error().
const maxErrorMessage = 512

// APIError is a non-2xx answer of the toolbox API. The body is parsed as an
// ErrorResponse when it is one (also accepting the "error" and "error_code"
// keys some servers use); otherwise Message holds the body text, or the
// status text when the body is empty.
//
// errors.Is(err, sandbox.ErrNotFound) holds for 404, and for the 500
// "session not found" with which Daytona's daemon answers an exec in an
// unknown session; errors.Is(err, sandbox.ErrExited) holds for 410.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the daemon's error code (e.g. "NOT_FOUND", "GONE",
	// "REQUEST_TIMEOUT"), empty when the body had none.
	Code string
	// Message is the error message.
	Message string
	// Method and Path are those of the request (the path without query).
	Method, Path string
	// Body is the raw body, cut at 64 KiB.
	Body []byte
}

// Error describes the failure: request, status, code and message.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("toolbox: ")
	if e.Method != "" {
		b.WriteString(e.Method)
		b.WriteByte(' ')
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" {
		b.WriteString(" (")
		b.WriteString(e.Code)
		b.WriteByte(')')
	}
	if msg := e.Message; msg != "" && msg != http.StatusText(e.StatusCode) {
		b.WriteString(": ")
		b.WriteString(errbody.Cut(msg, maxErrorMessage))
	}
	return b.String()
}

// Is maps statuses to the sandbox sentinels: 404 (and Daytona's 500
// "session not found") matches sandbox.ErrNotFound and 410 matches
// sandbox.ErrExited.
func (e *APIError) Is(target error) bool {
	switch target {
	case sandbox.ErrNotFound:
		return e.StatusCode == http.StatusNotFound || daytonaSessionMissing(e)
	case sandbox.ErrExited:
		return e.StatusCode == http.StatusGone
	}
	return false
}

// newAPIError reads (a bounded part of) resp's body and parses it.
func (c *Client) newAPIError(req *http.Request, resp *http.Response) *APIError {
	body := errbody.Read(resp.Body)
	e := parseAPIError(resp.StatusCode, body)
	e.Method = req.Method
	e.Path = req.URL.Path
	if c.token != "" {
		// A server echoing the request must not make us leak the token.
		e.Message = redact.Secrets(e.Message, c.token)
		e.Body = redact.SecretsBytes(e.Body, c.token)
	}
	return e
}

// parseAPIError builds an APIError from a status and a raw body, accepting
// the daemon's ErrorResponse, the control plane's NestJS shape and
// {"error", "error_code"} bodies, and falling back to the text.
func parseAPIError(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status, Body: body}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var raw struct {
			Message   json.RawMessage `json:"message"`
			Error     json.RawMessage `json:"error"`
			Code      json.RawMessage `json:"code"`
			ErrorCode json.RawMessage `json:"error_code"`
			Errors    json.RawMessage `json:"errors"`
		}
		if json.Unmarshal(trimmed, &raw) == nil {
			e.Message = jsonText(raw.Message)
			if e.Message == "" {
				e.Message = jsonText(raw.Error)
			}
			if e.Message == "" {
				e.Message = jsonText(raw.Errors) // bulk upload
			}
			e.Code = jsonText(raw.Code)
			if e.Code == "" || isNumber(e.Code) {
				if c := jsonText(raw.ErrorCode); c != "" {
					e.Code = c
				}
			}
			if isNumber(e.Code) {
				e.Code = "" // NestJS bodies may carry a numeric code
			}
			if e.Message != "" || e.Code != "" {
				return e
			}
		}
	}
	if len(trimmed) > 0 && utf8.Valid(trimmed) {
		e.Message = string(trimmed)
	} else {
		e.Message = http.StatusText(status)
	}
	return e
}

// jsonText renders a JSON value as text: strings unquoted, arrays of
// strings joined with "; ", other values as JSON.
func jsonText(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var list []any
	if json.Unmarshal(v, &list) == nil {
		parts := make([]string, 0, len(list))
		for _, x := range list {
			if s, ok := x.(string); ok {
				parts = append(parts, s)
			} else {
				b, _ := json.Marshal(x)
				parts = append(parts, string(b))
			}
		}
		return strings.Join(parts, "; ")
	}
	return string(v)
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
