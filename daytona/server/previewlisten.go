package server

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Preview URLs that resolve anywhere. A host-based preview URL,
// http://{port}-{sandboxId}.localhost:{servePort}, needs a resolver that
// sends every name under localhost to loopback: browsers and curl do,
// the system resolver of a stock Linux host (Node's, Python's) does not.
// So, unless the server has a preview domain (Options.PreviewDomain:
// wildcard DNS of the operator's), a preview URL is
// http://{ip}:{listenerPort}: a listener of the server's own, made for
// (sandbox, port) when its URL is first asked for, on the address the
// request came in on (loopback when serve listens there), proxying every
// request to that port of that sandbox, as a host-based preview does
// (previewconn.go: nothing is published, the sandbox steers nothing).
// The same tokens are asked for: the preview token's header or query
// parameter, an API key, or none for a public sandbox; a signed URL is
// the listener's URL followed by /{token}, a prefix stripped before the
// request goes on. A sandbox has at most maxListenersPerSandbox
// listeners, the server maxListeners; they close when the sandbox stops
// or goes, and with the server (Close).
//
// Browsers scope cookies by host, not port: listeners of different
// sandboxes on one address would share their apps' cookies (HttpOnly
// ones too), across organizations. So when the client came in on an IPv4
// loopback address, each sandbox's listeners get a loopback address of
// their own (127.77.x.y: Linux routes all of 127.0.0.0/8 to lo, no set-up
// needed), the cookie host of that sandbox alone. Other addresses (IPv6
// loopback, a non-loopback address serve listens on) are shared: there,
// --preview-domain gives each sandbox a host of its own.

const (
	// defaultListenersPerSandbox is how many preview listeners one
	// sandbox may have (one per port previewed).
	defaultListenersPerSandbox = 16
	// defaultListeners is how many preview listeners the server may
	// have in all.
	defaultListeners = 256
	// Deadlines of a preview listener's connections, as serve's own.
	listenerHeaderTimeout = 30 * time.Second
	listenerIdleTimeout   = 2 * time.Minute
)

// Why a preview listener could not be made.
var (
	errSandboxListeners = errors.New("the sandbox has as many preview listeners as it may")
	errServerListeners  = errors.New("the server has as many preview listeners as it may")
)

// listenerKey names a preview listener: the sandbox's port it reaches,
// and the address it listens on.
type listenerKey struct {
	id   string
	port int
	ip   string
}

// previewListener is a listener of previews of one sandbox's port.
type previewListener struct {
	addr string // host:port of its URL
	srv  *http.Server
}

// previewListeners are the server's preview listeners. Its fields are
// guarded by mu; it is used with the server's mu held, which comes first.
type previewListeners struct {
	mu         sync.Mutex
	perSandbox int // 0: defaultListenersPerSandbox
	max        int // 0: defaultListeners
	byKey      map[listenerKey]*previewListener
	loopback   map[string]string // sandbox id → its own IPv4 loopback address
	nextLoop   uint32            // the last loopback address handed out, 127.77.0.0 + n
	wg         sync.WaitGroup    // the listeners' Serve loops
}

// get returns the listener of k, made with handler h when there is none.
func (pl *previewListeners) get(k listenerKey, h http.Handler) (*previewListener, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if l := pl.byKey[k]; l != nil {
		return l, nil
	}
	n := 0
	for o := range pl.byKey {
		if o.id == k.id {
			n++
		}
	}
	if n >= cmp.Or(pl.perSandbox, defaultListenersPerSandbox) {
		return nil, fmt.Errorf("sandbox %s has %d: %w", k.id, n, errSandboxListeners)
	}
	if len(pl.byKey) >= cmp.Or(pl.max, defaultListeners) {
		return nil, fmt.Errorf("%d open: %w", len(pl.byKey), errServerListeners)
	}
	ip := pl.bindIP(k)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil && ip != k.ip {
		// A host whose lo does not take all of 127.0.0.0/8: shared.
		ip = k.ip
		ln, err = net.Listen("tcp", net.JoinHostPort(ip, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("listening for previews of port %d of sandbox %s on %s: %w", k.port, k.id, ip, err)
	}
	l := &previewListener{
		addr: ln.Addr().String(),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: listenerHeaderTimeout, IdleTimeout: listenerIdleTimeout},
	}
	if pl.byKey == nil {
		pl.byKey = map[listenerKey]*previewListener{}
	}
	pl.byKey[k] = l
	pl.wg.Go(func() { _ = l.srv.Serve(ln) })
	return l, nil
}

// bindIP returns the address the listener k listens on: the sandbox's own
// loopback address when k's is an IPv4 loopback one, else k's. Called
// with pl.mu held.
func (pl *previewListeners) bindIP(k listenerKey) string {
	if a, err := netip.ParseAddr(k.ip); err != nil || !a.Is4() || !a.IsLoopback() {
		return k.ip
	}
	if ip, ok := pl.loopback[k.id]; ok {
		return ip
	}
	taken := make(map[string]bool, len(pl.loopback))
	for _, ip := range pl.loopback {
		taken[ip] = true
	}
	var ip string
	for {
		// 127.77.0.1 to 127.77.255.254, then around again, skipping the
		// addresses of sandboxes that still have listeners.
		pl.nextLoop = pl.nextLoop%0xfffe + 1
		ip = netip.AddrFrom4([4]byte{127, 77, byte(pl.nextLoop >> 8), byte(pl.nextLoop)}).String()
		if !taken[ip] {
			break
		}
	}
	if pl.loopback == nil {
		pl.loopback = map[string]string{}
	}
	pl.loopback[k.id] = ip
	return ip
}

// closeSandbox closes the preview listeners of sandbox id, and their
// connections, and lets its loopback address go.
func (pl *previewListeners) closeSandbox(id string) {
	pl.closeIf(func(k listenerKey) bool { return k.id == id })
	pl.mu.Lock()
	delete(pl.loopback, id)
	pl.mu.Unlock()
}

// closeAll closes every preview listener and waits for their loops.
func (pl *previewListeners) closeAll() {
	pl.closeIf(func(listenerKey) bool { return true })
	pl.wg.Wait()
}

// closeIf closes the listeners whose key match.
func (pl *previewListeners) closeIf(match func(listenerKey) bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for k, l := range pl.byKey {
		if match(k) {
			_ = l.srv.Close()
			delete(pl.byKey, k)
		}
	}
}

// count returns how many preview listeners sandbox id has ("": the
// server in all).
func (pl *previewListeners) count(id string) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	n := 0
	for k := range pl.byKey {
		if id == "" || k.id == id {
			n++
		}
	}
	return n
}

// previewLink returns the preview URL of port of rec's sandbox for the
// client of r, for key: the sandbox's id, or a signed URL's token.
// Called with s.mu held.
func (s *Server) previewLink(r *http.Request, rec *record, port int, key string) (string, error) {
	if s.previewDomainOpt != "" {
		return s.previewURL(r, port, key), nil
	}
	k := listenerKey{id: rec.id, port: port, ip: localIP(r)}
	l, err := s.previews.listeners.get(k, s.listenerHandler(rec.id, port))
	switch {
	case errors.Is(err, errSandboxListeners):
		return "", &httpError{Status: http.StatusTooManyRequests, Err: err,
			Message: fmt.Sprintf("sandbox %s has preview URLs of %d ports, the most this server gives one sandbox: stop it and start it again to close them", rec.id, cmp.Or(s.previews.listeners.perSandbox, defaultListenersPerSandbox))}
	case errors.Is(err, errServerListeners):
		return "", &httpError{Status: http.StatusServiceUnavailable, Err: err,
			Message: "this server has as many preview listeners as it may: stop sandboxes whose previews are done, or start agentbox serve with --preview-domain DOMAIN (wildcard DNS) for host-based previews"}
	case err != nil:
		return "", err
	}
	u := "http://" + l.addr
	if key != rec.id {
		u += "/" + key
	}
	return u, nil
}

// localIP returns the address r came in on (loopback when unknown): the
// preview listeners of its client listen there.
func localIP(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && a.IP != nil && !a.IP.IsUnspecified() {
		return a.IP.String()
	}
	return "127.0.0.1"
}

// listenerHandler returns the handler of the preview listener of port of
// sandbox id: a request whose path starts with a live signed token of
// that port and sandbox goes on without it, every other needs what a
// host-based preview of the sandbox needs.
func (s *Server) listenerHandler(id string, port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.guard(w, r, true) {
			return
		}
		key := id
		if token, rest := signedPrefix(r.URL.EscapedPath()); token != "" {
			s.mu.Lock()
			sp, ok := s.signed[token]
			s.mu.Unlock()
			if ok && sp.id == id && sp.port == port {
				key = token
				r = withPath(r, rest)
			}
		}
		if err := s.servePreview(w, r, port, key); err != nil {
			writeError(w, r, err, s.logf)
		}
	})
}

// signedPrefix splits an escaped path into its first segment, when it
// looks like a signed preview token (newToken), and the rest (from its
// slash on).
func signedPrefix(path string) (token, rest string) {
	seg, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if len(seg) != 32 || strings.Trim(seg, "0123456789abcdef") != "" {
		return "", ""
	}
	return seg, "/" + rest
}

// withPath returns a copy of r for escaped, an escaped path.
func withPath(r *http.Request, escaped string) *http.Request {
	out := r.Clone(r.Context())
	if p, err := url.PathUnescape(escaped); err == nil {
		out.URL.Path, out.URL.RawPath = p, escaped
	}
	return out
}

// checkPreviewDomain says what is wrong with d as Options.PreviewDomain
// (a host name, with a port or not), if anything.
func checkPreviewDomain(d string) error {
	if d == "" {
		return nil
	}
	host := d
	if h, p, err := net.SplitHostPort(d); err == nil {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return fmt.Errorf("agentbox serve: preview domain %q: the port must be a number from 0 to 65535", d)
		}
		host = h
	}
	if host == "" || strings.HasPrefix(host, ".") || strings.ContainsAny(host, "/:@?#* \t") {
		return fmt.Errorf("agentbox serve: preview domain %q is not a host name such as preview.example.com (its wildcard DNS, *.preview.example.com, must reach this server)", d)
	}
	return nil
}
