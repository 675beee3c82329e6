package spectest

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

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
