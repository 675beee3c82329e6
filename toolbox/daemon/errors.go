package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Error codes of the toolbox API (DaemonErrorCode in the spec).
const (
	codeBadRequest         = "BAD_REQUEST"
	codeInvalidRequestBody = "INVALID_REQUEST_BODY"
	codeNotFound           = "NOT_FOUND"
	codeConflict           = "CONFLICT"
	codeRequestTimeout     = "REQUEST_TIMEOUT"
	codeGone               = "GONE"
	codeInternal           = "INTERNAL_SERVER_ERROR"
	codeFileNotFound       = "FILE_NOT_FOUND"
	codeFileAccessDenied   = "FILE_ACCESS_DENIED"
)

// httpError is an error that knows its HTTP status and API code.
type httpError struct {
	status int
	code   string
	msg    string
	err    error
}

func (e *httpError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *httpError) Unwrap() error { return e.err }

func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *httpError {
	return errorf(http.StatusBadRequest, codeBadRequest, format, args...)
}

func notFound(format string, args ...any) *httpError {
	return errorf(http.StatusNotFound, codeNotFound, format, args...)
}

// category is the prefix Daytona puts in front of messages.
func category(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad request"
	case http.StatusNotFound:
		return "not found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestTimeout:
		return "request timeout"
	case http.StatusGone:
		return "gone"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusRequestEntityTooLarge:
		return "request entity too large"
	case http.StatusServiceUnavailable:
		return "service unavailable"
	default:
		return "internal server error"
	}
}

// errorBody builds the ErrorResponse for status, code and message.
func errorBody(r *http.Request, status int, code, msg string) toolbox.ErrorResponse {
	return toolbox.ErrorResponse{
		StatusCode: status,
		Message:    category(status) + ": " + msg,
		Code:       code,
		Timestamp:  time.Now().UTC().Format(time.RFC3339),
		Path:       r.URL.Path,
		Method:     r.Method,
	}
}

// writeError answers with an ErrorResponse describing err.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{status: http.StatusInternalServerError, code: codeInternal, msg: err.Error()}
	}
	msg := he.Error()
	if he.status >= 500 && s.log != nil {
		s.log.Error("toolbox request failed", "method", r.Method, "path", r.URL.Path, "err", msg)
	}
	writeJSON(w, he.status, errorBody(r, he.status, he.code, msg))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal server error: encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeJSONFlushed answers with v as JSON, with a Content-Length, and
// flushes the answer to the connection. It reports whether that worked.
func writeJSONFlushed(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal server error: encoding response: "+err.Error(), http.StatusInternalServerError)
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if _, err := w.Write(b); err != nil {
		return err
	}
	if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
