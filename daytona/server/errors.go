package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// httpError is an error the server answers with its HTTP status, in the
// shape of Daytona's API errors. Handlers return it; writeError finds it
// in a wrapped chain.
type httpError struct {
	// Status is the HTTP status code.
	Status int
	// Message is what the client reads.
	Message string
	// Err is the cause, when there is one; it is never shown to the client.
	Err error
}

func (e *httpError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, http.StatusText(e.Status), e.Message, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

func (e *httpError) Unwrap() error { return e.Err }

// errorf returns an *httpError with status and a formatted message.
func errorf(status int, format string, args ...any) *httpError {
	return &httpError{Status: status, Message: fmt.Sprintf(format, args...)}
}

// Messages Daytona uses, word for word, where clients match them.
const (
	msgStateChange = "Sandbox state change in progress"
	msgErrored     = "Sandbox is in an errored state"
)

// errorBody is the body of every error: Daytona's NestJS shape.
type errorBody struct {
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Message    string `json:"message"`
	Path       string `json:"path"`
	Timestamp  string `json:"timestamp"`
}

// writeError answers r with err: its status and message when it is (or
// wraps) an *httpError, else 500 with a generic message (the cause goes to
// log, never to the client).
func writeError(w http.ResponseWriter, r *http.Request, err error, log func(string, ...any)) {
	var e *httpError
	if !errors.As(err, &e) {
		if log != nil {
			log("agentbox serve: %s %s: %v", r.Method, r.URL.Path, err)
		}
		e = &httpError{Status: http.StatusInternalServerError, Message: "Internal server error"}
	}
	if e.Status == http.StatusUnauthorized {
		stopReading(w)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(errorBody{
		StatusCode: e.Status,
		Error:      http.StatusText(e.Status),
		Message:    e.Message,
		Path:       r.URL.Path,
		Timestamp:  time.Now().UTC().Format(timeLayout),
	})
}

// stopReading makes the connection of w, whose request had no valid key,
// read nothing more: its answer is written and the connection closed,
// so that a client without a key cannot hold it open by trickling a
// body that the HTTP server would otherwise wait for (it discards an
// unread body before the next request, with no deadline of its own).
func stopReading(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	// A writer that cannot (an HTTP/2 stream of a test) keeps its
	// server's own limits.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// writeJSON answers with v as JSON and status 200.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

// timeLayout is how times go on the wire: JavaScript's toISOString.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"
