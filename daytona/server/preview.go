package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"
)

// Preview URLs, as Daytona's: http://{port}-{sandboxId}.{domain} reaches
// port of a started sandbox (its server must listen on all addresses;
// connections in previewconn.go),
// with the sandbox's preview token in X-Daytona-Preview-Token (or the
// query parameter DAYTONA_SANDBOX_AUTH_KEY) unless the sandbox is public;
// http://{port}-{token}.{domain}, a signed URL, needs no token until it
// expires. The domain is Options.PreviewDomain, else the server's host,
// or localhost (at the server's port) when that is an IP address:
// browsers resolve every name under localhost to loopback. Without
// Options.PreviewDomain the URLs the API gives are those of preview
// listeners instead (previewlisten.go); host-based URLs keep working.

// Names of the preview token in a request.
const (
	previewTokenHeader = "X-Daytona-Preview-Token"
	previewTokenQuery  = "DAYTONA_SANDBOX_AUTH_KEY"
)

// defaultSignedExpiry is how long a signed preview URL lasts when the
// request does not say.
const defaultSignedExpiry = 60 * time.Second

// maxSignedPerSandbox is how many live signed preview URLs one sandbox
// may have: each is kept in memory until it expires (at most a day).
const maxSignedPerSandbox = 100

// signedPreview is what a signed preview URL's token stands for.
type signedPreview struct {
	id      string
	port    int
	expires time.Time
}

// sweepSigned forgets the signed preview tokens that have expired, and
// those of sandboxes that are gone, so that the table holds live ones
// only (the reconciler calls it every tick).
func (s *Server) sweepSigned() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for token, sp := range s.signed {
		if !now.Before(sp.expires) || s.byID[sp.id] == nil {
			delete(s.signed, token)
		}
	}
}

// newToken returns a random token for preview URLs: lower-case letters and
// digits, valid in a DNS label.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// parsePreviewHost splits a preview host, {port}-{key}.{domain}, into the
// port and the key (a sandbox id or a signed token).
func parsePreviewHost(host string) (port int, key string, ok bool) {
	label, _, found := strings.Cut(host, ".")
	if !found {
		return 0, "", false
	}
	p, key, found := strings.Cut(label, "-")
	if !found || key == "" {
		return 0, "", false
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > math.MaxUint16 {
		return 0, "", false
	}
	return port, key, true
}

// previewDomain returns the domain of preview URLs for clients of r:
// Options.PreviewDomain, else the server's host (localhost for an IP
// address), with the server's port when the domain has none.
func (s *Server) previewDomain(r *http.Request) string {
	hostport := strings.TrimPrefix(strings.TrimPrefix(s.baseURL(r), "http://"), "https://")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	if net.ParseIP(strings.Trim(host, "[]")) != nil {
		host = "localhost"
	}
	if d := s.previewDomainOpt; d != "" {
		if _, _, err := net.SplitHostPort(d); err == nil {
			return d
		}
		host = d
	}
	if port != "" {
		return host + ":" + port
	}
	return host
}

// previewURL returns the preview URL of key (a sandbox id or a signed
// token) and port.
func (s *Server) previewURL(r *http.Request, port int, key string) string {
	return fmt.Sprintf("http://%d-%s.%s", port, key, s.previewDomain(r))
}

// parsePort reads a port path parameter.
func parsePort(raw string) (int, error) {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || f != math.Trunc(f) || f < 1 || f > math.MaxUint16 {
		return 0, errorf(http.StatusBadRequest, "port %q must be a TCP port number, from 1 to 65535", raw)
	}
	return int(f), nil
}

func (s *Server) getPreviewURL(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	return s.withSandbox(func(r *http.Request, rec *record) (any, error) {
		u, err := s.previewLink(r, rec, port, rec.id)
		if err != nil {
			return nil, err
		}
		return portPreviewURL{SandboxID: rec.id, URL: u, Token: rec.previewToken}, nil
	})(w, r)
}

func (s *Server) getSignedPreviewURL(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	expiry := defaultSignedExpiry
	if raw := r.URL.Query().Get("expiresInSeconds"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 24*60*60 {
			return errorf(http.StatusBadRequest, "expiresInSeconds must be a whole number from 1 to 86400")
		}
		expiry = time.Duration(n) * time.Second
	}
	return s.withSandbox(func(r *http.Request, rec *record) (any, error) {
		now, live := s.now(), 0
		for _, sp := range s.signed {
			if sp.id == rec.id && now.Before(sp.expires) {
				live++
			}
		}
		if live >= maxSignedPerSandbox {
			return nil, errorf(http.StatusTooManyRequests, "sandbox %s has %d live signed preview URLs, the most this server keeps: expire some (POST .../signed-preview-url/{token}/expire) or wait for them to expire", rec.id, live)
		}
		token := newToken()
		u, err := s.previewLink(r, rec, port, token)
		if err != nil {
			return nil, err
		}
		s.signed[token] = signedPreview{id: rec.id, port: port, expires: s.now().Add(expiry)}
		return signedPortPreviewURL{SandboxID: rec.id, Port: port, Token: token, URL: u}, nil
	})(w, r)
}

func (s *Server) expireSignedPreviewURL(w http.ResponseWriter, r *http.Request) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	token := r.PathValue("token")
	if sp, ok := s.signed[token]; !ok || sp.id != rec.id || sp.port != port {
		return errorf(http.StatusNotFound, "no signed preview URL %s for port %d of sandbox %s", token, port, rec.id)
	}
	delete(s.signed, token)
	return nil
}

// servePreview proxies r, whose host is a preview URL's, to the port of
// the sandbox it names.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, port int, key string) error {
	s.mu.Lock()
	rec, public, err := s.previewTarget(r, port, key)
	var id, state string
	if rec != nil {
		id, state = rec.id, rec.state
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if !public {
		return errorf(http.StatusUnauthorized, "this preview needs the sandbox's preview token in the %s header (from GET /api/sandbox/{id}/ports/{port}/preview-url), or a signed preview URL", previewTokenHeader)
	}
	if state != stateStarted {
		return errorf(http.StatusConflict, "Sandbox %s is %s, not started: start it first", id, state)
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = "http", net.JoinHostPort(id, strconv.Itoa(port)) // newPreviewTransport dials it
	out.RequestURI = ""
	q := out.URL.Query()
	if q.Has(previewTokenQuery) {
		q.Del(previewTokenQuery)
		out.URL.RawQuery = q.Encode()
	}
	_ = http.NewResponseController(w).EnableFullDuplex() // as the toolbox proxy (proxy.go)
	s.preview.ServeHTTP(w, out)
	return nil
}

// previewTarget returns the sandbox that the preview host's key names, and
// whether r may reach it (a public sandbox, its preview token, one of the
// server's keys, or a live signed URL). Called with s.mu held.
func (s *Server) previewTarget(r *http.Request, port int, key string) (*record, bool, error) {
	if sp, ok := s.signed[key]; ok {
		if sp.port != port || !s.now().Before(sp.expires) {
			if !s.now().Before(sp.expires) {
				delete(s.signed, key)
			}
			return nil, false, errorf(http.StatusUnauthorized, "the signed preview URL expired or is for another port")
		}
		rec := s.byID[sp.id]
		if rec == nil {
			return nil, false, errorf(http.StatusNotFound, "Sandbox with ID or name %s not found", sp.id)
		}
		return rec, true, nil
	}
	rec := s.byID[key]
	if rec == nil {
		return nil, false, errorf(http.StatusNotFound, "no sandbox or signed preview URL %s", key)
	}
	if rec.public || hasPreviewToken(r, rec.previewToken) {
		return rec, true, nil
	}
	if org, keyed := s.requestOrg(r); s.AuthRequired() && keyed {
		if org != rec.org { // another organization's sandbox
			return nil, false, errorf(http.StatusNotFound, "no sandbox or signed preview URL %s", key)
		}
		return rec, true, nil
	}
	return rec, false, nil
}

// hasPreviewToken reports whether r carries token (never empty) in the
// preview token's header or query parameter.
func hasPreviewToken(r *http.Request, token string) bool {
	got := r.Header.Get(previewTokenHeader)
	if got == "" {
		got = r.URL.Query().Get(previewTokenQuery)
	}
	return token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// newPreviewProxy returns the reverse proxy of preview requests, whose
// URL's host is already "{sandboxId}:{port}".
func newPreviewProxy(s *Server) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport: s.previewTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Del(previewTokenHeader)
			pr.Out.Header.Del("Authorization")
			dropDashboardCredentials(pr.Out.Header)
			pr.Out.Host = pr.In.Host // the app sees the preview host
			pr.SetXForwarded()
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			id, p, _ := net.SplitHostPort(r.URL.Host)
			port, _ := strconv.Atoi(p)
			writeError(w, r, previewDialError(id, port, err), s.logf)
		},
	}
}
