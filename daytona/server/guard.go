package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The browser cannot drive serve. A web page the operator visits may
// send requests to serve's address without reading the answers ("simple"
// requests: GET, and POSTs of text/plain, forms or multipart bodies), and,
// through DNS rebinding, under a host name of its own whose answers it
// reads. So, before anything else:
//
//   - a server without API keys answers only requests whose Host is a
//     loopback name (localhost, *.localhost for previews, 127.0.0.1, [::1],
//     any port) or the host of Options.PublicURL;
//   - every state-changing request (not GET, HEAD or OPTIONS) passes Go's
//     cross-origin protection (Sec-Fetch-Site, Origin), and, but for
//     previews (the sandbox's own app), has a JSON or multipart body (the
//     SDKs' uploads) or none (of any Content-Type: the SDKs' bodiless
//     POSTs say form): text/plain and form bodies are refused;
//   - a WebSocket whose Origin is another host's is refused (the toolbox's
//     too, which the proxy carries).

// guard answers and returns false when r must not reach the server.
func (s *Server) guard(w http.ResponseWriter, r *http.Request, preview bool) bool {
	if !s.AuthRequired() && !s.trustedHost(r.Host) {
		writeError(w, r, errorf(http.StatusMisdirectedRequest,
			"agentbox serve without API keys answers loopback host names only (localhost, 127.0.0.1, [::1]), not %q: give the server API keys (agentbox serve --generate-key) to serve other hosts", r.Host), nil)
		return false
	}
	if isUpgrade(r) && !sameOrigin(r) {
		writeError(w, r, errorf(http.StatusForbidden, "cross-origin WebSocket refused: the Origin %q is not this server's", r.Header.Get("Origin")), nil)
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	if err := s.cop.Check(r); err != nil {
		writeError(w, r, errorf(http.StatusForbidden, "cross-origin request refused: agentbox serve takes state-changing requests from its clients, not from web pages of other sites"), nil)
		return false
	}
	if preview {
		return true
	}
	if r.ContentLength == 0 {
		// No body: nothing but the URL, which the cross-origin check
		// covers (the SDKs send their bodiless POSTs as forms).
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		writeError(w, r, errorf(http.StatusUnsupportedMediaType, "a request body needs Content-Type: application/json (or multipart/form-data for uploads)"), nil)
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || mt == "multipart/form-data" || strings.HasSuffix(mt, "+json")) {
		return true
	}
	writeError(w, r, errorf(http.StatusUnsupportedMediaType, "Content-Type %q is not accepted: send application/json (or multipart/form-data for uploads)", ct), nil)
	return false
}

// trustedHost reports whether a keyless server answers requests for
// host (HOST[:PORT]): a loopback name, or Options.PublicURL's host.
func (s *Server) trustedHost(host string) bool {
	h := hostOnly(host)
	switch {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return true
	case h == "":
		return false
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	if s.publicURL != "" {
		if u, err := url.Parse(s.publicURL); err == nil {
			if p := hostOnly(u.Host); p != "" && (h == p || strings.HasSuffix(h, "."+p)) {
				return true
			}
		}
	}
	return false
}

// hostOnly returns the lower-case host name of HOST[:PORT], without the
// brackets of an IPv6 address.
func hostOnly(hostport string) string {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
}

// sameOrigin reports whether r carries no Origin (not a browser's) or one
// of r's own host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}
