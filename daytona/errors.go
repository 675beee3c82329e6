package daytona

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/errbody"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Sentinel errors an *APIError matches by its status.
var (
	ErrBadRequest   = errors.New("bad request")        // 400
	ErrUnauthorized = errors.New("unauthorized")       // 401
	ErrForbidden    = errors.New("forbidden")          // 403
	ErrNotFound     = errors.New("not found")          // 404 (also matches sandbox.ErrNotFound)
	ErrConflict     = errors.New("conflict")           // 409
	ErrRateLimited  = errors.New("rate limited")       // 429
	ErrUnavailable  = errors.New("server unavailable") // 5xx
)

// APIError is an error answer of Daytona's API.
type APIError struct {
	// Method and Path are the request's ("GET", "/sandbox/x").
	Method, Path string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the error's code: the body's "code" (toolbox errors, e.g.
	// "NOT_FOUND"), else its "error" (the API's reason phrase, e.g. "Not
	// Found"); "" when the body had none.
	Code string
	// Message is the body's message, or the body itself when it is not
	// JSON (at most 512 bytes, cut on a rune boundary).
	Message string
	// RetryAfter is the answer's Retry-After, 0 when it had none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	out := fmt.Sprintf("daytona: %s %s: %d %s", e.Method, e.Path, e.StatusCode, msg)
	switch e.StatusCode {
	case http.StatusUnauthorized:
		out += " (check the API key: DAYTONA_API_KEY or Config.APIKey; or DAYTONA_JWT_TOKEN with DAYTONA_ORGANIZATION_ID)"
	case http.StatusForbidden:
		out += " (the API key lacks the permission, or DAYTONA_ORGANIZATION_ID names another organization)"
	}
	return out
}

// Is matches the sentinel of e's status (see the package's Err…
// variables).
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.StatusCode == http.StatusBadRequest
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrNotFound, sandbox.ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrRateLimited:
		return e.StatusCode == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.StatusCode >= 500
	}
	return false
}

// errorBody holds the fields of both error shapes: the API's NestJS one
// {statusCode, error, message, path, timestamp} (message a string or a
// list of strings) and the toolbox's {statusCode, message, code}.
type errorBody struct {
	Code      string          `json:"code"`
	Error     string          `json:"error"`
	ErrorCode string          `json:"error_code"`
	Message   json.RawMessage `json:"message"`
}

// maxErrorMessage is how much of a body that is not JSON an APIError's
// Message keeps, in bytes.
const maxErrorMessage = 512

// parseAPIError returns the *APIError of an error answer with body.
func parseAPIError(method, path string, resp *http.Response, body []byte) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var b errorBody
	if json.Unmarshal(body, &b) == nil {
		e.Code = firstOf(b.Code, b.ErrorCode, b.Error)
		var s string
		var list []string
		switch {
		case json.Unmarshal(b.Message, &s) == nil:
			e.Message = s
		case json.Unmarshal(b.Message, &list) == nil:
			e.Message = strings.Join(list, ", ")
		}
	}
	if e.Message == "" && e.Code == "" {
		e.Message = errbody.Cut(strings.TrimSpace(string(body)), maxErrorMessage)
	}
	return e
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// NotDaytonaError is the error of a call whose answer does not come from a
// Daytona API: a success whose body is not the JSON expected, as when the
// API URL points at another server.
type NotDaytonaError struct {
	// URL is the request's URL.
	URL string
	// Err is the decoding error.
	Err error
}

func (e *NotDaytonaError) Error() string {
	return fmt.Sprintf("daytona: %s answered with something other than Daytona's API (%v): check DAYTONA_API_URL or Config.APIURL (it ends in /api, e.g. %s)", e.URL, e.Err, DefaultAPIURL)
}

func (e *NotDaytonaError) Unwrap() error { return e.Err }
