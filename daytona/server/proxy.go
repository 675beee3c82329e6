package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// toolboxProxy forwards toolbox requests to the toolbox server of each
// started sandbox, as Daytona's proxy does: the route's prefix stripped,
// the credentials removed, WebSocket upgrades included. A request carries
// an API key, or the sandbox's preview token (header
// X-Daytona-Preview-Token or query parameter DAYTONA_SANDBOX_AUTH_KEY: what
// browsers, which cannot set a WebSocket's headers, send).
type toolboxProxy struct {
	s         *Server
	transport *http.Transport
	rp        *httputil.ReverseProxy
}

// sandboxHost is the host name of the URL a proxied request is sent to:
// <sandbox id>.sandboxHost; the transport dials the sandbox it names.
const sandboxHost = "sandbox.agentbox"

func newToolboxProxy(s *Server) *toolboxProxy {
	p := &toolboxProxy{s: s}
	p.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return s.eng.dial(ctx, strings.TrimSuffix(host, "."+sandboxHost))
		},
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // commands may run long before answering
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The target is set by serve; only headers are fixed here.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del(previewTokenHeader)
			dropDashboardCredentials(pr.Out.Header)
			// Only serve's own sampler reads a sandbox passively: a
			// client's call through the proxy is a use of it, whatever
			// it says.
			pr.Out.Header.Del(local.PassiveRequestHeader)
		},
		Transport:     p.transport,
		FlushInterval: -1, // streams (logs, PTY output) pass at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, r, &httpError{Status: http.StatusBadGateway, Message: "the sandbox's toolbox did not answer", Err: err}, s.logf)
		},
	}
	return p
}

// close releases the proxy's idle connections.
func (p *toolboxProxy) close() { p.transport.CloseIdleConnections() }

// serve proxies r to the toolbox of the sandbox {id}, at {path}.
func (p *toolboxProxy) serve(w http.ResponseWriter, r *http.Request) error {
	s := p.s
	// A key reaches the sandboxes of its organization; the preview
	// token, its sandbox.
	org, keyed := s.requestOrg(r)
	s.mu.Lock()
	rec, err := s.lookup(org, r.PathValue("id"))
	byToken := false // the preview token let r in
	if !keyed || err != nil {
		if byID := s.byID[r.PathValue("id")]; byID != nil && hasPreviewToken(r, byID.previewToken) {
			rec, err, keyed, byToken = byID, nil, true, true
		}
	}
	var id, state string
	if err == nil {
		id, state = rec.id, rec.state
	}
	s.mu.Unlock()
	if !keyed {
		return errorf(http.StatusUnauthorized, "Unauthorized: send a valid API key as Authorization: Bearer KEY, or the sandbox's preview token")
	}
	if err != nil {
		return err
	}
	if state == statePaused || state == stateResuming {
		if state, err = s.resumeForToolbox(r.Context(), rec); err != nil {
			return err
		}
	}
	if state != stateStarted {
		return errorf(http.StatusConflict, "Sandbox %s is %s, not started: start it first", id, state)
	}
	out := r.Clone(r.Context())
	out.URL.Scheme = "http"
	out.URL.Host = id + "." + sandboxHost
	out.URL.Path = "/" + r.PathValue("path")
	out.URL.RawPath = ""
	if rest, ok := restOfPath(r.URL.EscapedPath(), p.depth(r)); ok {
		out.URL.RawPath = rest // keeps escapes such as %2F
	}
	out.Host = ""
	out.RequestURI = ""
	if q := out.URL.Query(); q.Has(previewTokenQuery) || q.Has(csrfQuery) {
		q.Del(previewTokenQuery)
		q.Del(csrfQuery)
		out.URL.RawQuery = q.Encode()
	}
	// The request's body is copied to the sandbox while its answer comes
	// back: without full duplex, the server would close the body when the
	// answer's headers are written (after reading at most 256 KiB of what
	// is left), and the transport, failing to read it, would close the
	// sandbox's connection in the middle of the answer (issue 27: bulk
	// downloads cut short). A writer that cannot (HTTP/2, which is full
	// duplex anyway) is left as it is.
	_ = http.NewResponseController(w).EnableFullDuplex()
	w, endTrail := s.trailToolbox(w, out, id, func() string { // activityproxy.go
		if byToken {
			return "preview token"
		}
		return s.actorOf(r)
	})
	defer endTrail() // also when the proxy aborts a cut answer (it panics)
	p.rp.ServeHTTP(w, out)
	return nil
}

// depth is the number of segments of r's route before the toolbox path:
// 2 for /toolbox/{id}/…, 4 for /api/toolbox/{id}/toolbox/….
func (p *toolboxProxy) depth(r *http.Request) int {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		return 4
	}
	return 2
}

// restOfPath returns the part of the escaped path after its first n
// segments, from its slash on.
func restOfPath(escaped string, n int) (string, bool) {
	rest := escaped
	for range n {
		i := strings.IndexByte(rest[1:], '/')
		if !strings.HasPrefix(rest, "/") || i < 0 {
			return "", false
		}
		rest = rest[1+i:]
	}
	return rest, true
}
