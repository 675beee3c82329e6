package daemon

import (
	"errors"
	"fmt"
	"net/http"
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

// errClosed is returned by handlers asked to start something new (a
// session, a one-shot execution) while or after the server closes: such a
// request gets no answer, its connection is closed (see handle), as by a
// server that has stopped. Neither of Daytona's specs declares a status for
// "shutting down" on these operations (503 appears only on computer-use
// routes), so no answer is the one Daytona clients are written for.
var errClosed = errors.New("daemon: the toolbox server is closed")

// asHTTPError returns err as an *httpError: itself when it is one, else a
// 500 carrying its message.
func asHTTPError(err error) *httpError {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{status: http.StatusInternalServerError, code: codeInternal, msg: err.Error()}
	}
	return he
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
	case http.StatusNotImplemented:
		return "not implemented"
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
	he := asHTTPError(err)
	msg := he.Error()
	if he.status >= 500 && s.log != nil {
		s.log.Error("toolbox request failed", "method", r.Method, "path", r.URL.Path, "err", msg)
	}
	writeJSON(w, he.status, errorBody(r, he.status, he.code, msg))
}
