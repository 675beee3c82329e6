package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// A handlerFunc serves one API request. An error it returns is answered
// with an ErrorResponse (see writeError), so a handler that returns an error
// must not have written to w; once it has started its answer it returns
// nil.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle registers h for pattern on m. A handler's errClosed closes the
// connection without an answer.
func (s *Server) handle(m *http.ServeMux, pattern string, h handlerFunc) {
	m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		switch {
		case err == nil:
		case errors.Is(err, errClosed):
			panic(http.ErrAbortHandler) // net/http closes the connection
		default:
			s.writeError(w, r, err)
		}
	})
}

// decodeJSON reads the request body as JSON into v, enforcing MaxBodyBytes.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, s.maxBody)
	return decodeJSONBody(body, s.maxBody, v)
}

// decodeJSONBody decodes one JSON value from body into v.
func decodeJSONBody(body io.Reader, limit int64, v any) error {
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		switch {
		case isTooLarge(err):
			return bodyTooLarge(limit)
		case errors.Is(err, io.EOF):
			return errorf(http.StatusBadRequest, codeInvalidRequestBody, "invalid request body: the body is empty, a JSON object is required")
		default:
			return &httpError{status: http.StatusBadRequest, code: codeInvalidRequestBody, msg: "invalid request body: a JSON object is required", err: err}
		}
	}
	// Only whitespace may follow the value.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if isTooLarge(err) {
			return bodyTooLarge(limit)
		}
		return errorf(http.StatusBadRequest, codeInvalidRequestBody, "invalid request body: unexpected data after the JSON object")
	}
	return nil
}

func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

func bodyTooLarge(limit int64) error {
	return errorf(http.StatusRequestEntityTooLarge, codeInvalidRequestBody,
		"request body exceeds %d bytes; send less data or upload files with /files/bulk-upload", limit)
}

// uses reports whether the request opted in to the agentbox extension ext.
func uses(r *http.Request, ext string) bool { return toolbox.Uses(r.Header, ext) }

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	_ = writeJSONBody(w, status, v, false)
}

// writeJSONFlushed answers with v as JSON, with a Content-Length, and
// flushes the answer to the connection. It reports whether that worked.
func writeJSONFlushed(w http.ResponseWriter, status int, v any) error {
	return writeJSONBody(w, status, v, true)
}

func writeJSONBody(w http.ResponseWriter, status int, v any, flush bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal server error: encoding response: "+err.Error(), http.StatusInternalServerError)
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if !flush {
		w.WriteHeader(status)
		_, err = w.Write(b)
		return err
	}
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
