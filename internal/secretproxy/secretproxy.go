package secretproxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/goroutine"
	"github.com/agentbox-dev/agentbox/internal/hostname"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// DefaultMaxBody is the default of [Config.MaxBody].
const DefaultMaxBody = 1 << 20

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "agentbox_secret_"

// placeholderChars are the characters of a placeholder after its prefix.
const placeholderChars = "abcdefghijklmnopqrstuvwxyz0123456789"

// ErrUnimplemented was returned by the contract's stubs; no function
// returns it any more.
var ErrUnimplemented = errors.New("secretproxy: not implemented yet")

// ErrClosed is returned by [Proxy.SetSecrets] once the proxy is closed.
var ErrClosed = errors.New("secretproxy: proxy closed")

// NewPlaceholder returns a new random placeholder: PlaceholderPrefix and
// 32 lower-case letters and digits (about 165 bits), which survive URL
// and shell quoting unchanged.
func NewPlaceholder() string {
	var b [32]byte
	out := make([]byte, 0, len(PlaceholderPrefix)+len(b))
	out = append(out, PlaceholderPrefix...)
	for len(out) < cap(out) {
		rand.Read(b[:])
		for _, c := range b {
			// 252 = 7*36: rejecting larger bytes keeps the draw uniform.
			if c < 252 && len(out) < cap(out) {
				out = append(out, placeholderChars[c%36])
			}
		}
	}
	return string(out)
}

// Secret is one secret of a sandbox as the proxy holds it.
type Secret struct {
	// Name is the environment variable (for events; never the value).
	Name string
	// Placeholder is what the sandbox holds in its place.
	Placeholder string
	// Value replaces Placeholder in requests to Hosts.
	Value string
	// Hosts are canonical host patterns (sandbox.Secret.Canonical).
	Hosts []string
	// AllowHTTP lets Value go over cleartext HTTP too.
	AllowHTTP bool
}

// Format prints s without its value or placeholder.
func (s Secret) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "secretproxy.Secret{Name: %q, Hosts: %q}", s.Name, s.Hosts)
}

// allows reports whether s's value may go to host (canonical), over TLS
// or cleartext.
func (s *Secret) allows(host string, overTLS bool) bool {
	return (overTLS || s.AllowHTTP) && s.matches(host)
}

// matches reports whether host is one of s's hosts.
func (s *Secret) matches(host string) bool {
	return sandbox.Secret{Hosts: s.Hosts}.Allows(host)
}

// Event is what the proxy reports to the sandbox's policy log: a
// placeholder sent where its secret may not go, or a request it refused.
// It never holds a value or a placeholder.
type Event struct {
	Time     time.Time
	Protocol string // "https" or "http"
	Host     string
	Port     uint16
	Secret   string // the secret's Name, when a placeholder was seen
	Reason   string
}

// Config configures a [Proxy].
type Config struct {
	// CA signs the certificates the proxy shows the sandbox. Required.
	CA *CA
	// Secrets are the sandbox's secrets; [Proxy.SetSecrets] replaces them.
	Secrets []Secret
	// RootCAs verify the upstream hosts; nil: the host's trust store.
	RootCAs *x509.CertPool
	// Dial connects to host:port upstream (the TLS handshake is the
	// proxy's): through the domain proxy's policy, or through the
	// sandbox's own network for redirected connections. Required.
	Dial func(ctx context.Context, host string, port uint16) (net.Conn, error)
	// MaxBody bounds the request bodies in which placeholders are
	// replaced; a longer body streams unchanged. Default: DefaultMaxBody.
	MaxBody int64
	// OnEvent, if set, is called with each event; it must not block.
	OnEvent func(Event)
}

// Proxy substitutes a sandbox's secrets. It is safe for concurrent use.
type Proxy struct {
	cfg     Config
	table   atomic.Pointer[table]
	tr      *http.Transport
	rp      *httputil.ReverseProxy
	srv     *http.Server
	ln      *chanListener
	ctx     context.Context // cancelled by Close
	stop    context.CancelFunc
	g       goroutine.Group
	mu      sync.Mutex
	closed  bool
	serving map[*servedConn]struct{}
}

// table is one set of secrets, never changed once stored.
type table struct {
	secrets []Secret
	// prefixed: every placeholder starts with PlaceholderPrefix, so that
	// text without the prefix holds none.
	prefixed bool
}

// New returns a proxy configured by c, serving until [Proxy.Close].
func New(c Config) (*Proxy, error) {
	if c.CA == nil || c.CA.key == nil {
		return nil, errors.New("secretproxy: Config.CA is required: load one with LoadOrCreateCA")
	}
	if c.Dial == nil {
		return nil, errors.New("secretproxy: Config.Dial is required: say how to reach the upstream hosts")
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	t, err := newTable(c.Secrets)
	if err != nil {
		return nil, err
	}
	c.Secrets = nil
	p := &Proxy{cfg: c, serving: map[*servedConn]struct{}{}, ln: newChanListener()}
	p.table.Store(t)
	p.ctx, p.stop = context.WithCancel(context.Background())
	p.tr = p.newTransport()
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.route,
		Transport:      p.tr,
		BufferPool:     &copyBufs,
		ModifyResponse: p.scrubResponse,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.handle),
		ConnContext:       connContext,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	p.g.Go(func() { _ = p.srv.Serve(p.ln) })
	return p, nil
}

// newTable validates secrets into a table.
func newTable(secrets []Secret) (*table, error) {
	t := &table{secrets: make([]Secret, 0, len(secrets)), prefixed: true}
	seen := map[string]bool{}
	for _, s := range secrets {
		c, err := sandbox.Secret{Name: s.Name, Value: s.Value, Hosts: s.Hosts, AllowHTTP: s.AllowHTTP}.Canonical()
		if err != nil {
			return nil, fmt.Errorf("secretproxy: %w", err)
		}
		if len(s.Placeholder) < 16 || seen[s.Placeholder] {
			return nil, fmt.Errorf("secretproxy: secret %q: its placeholder is shorter than 16 bytes or another secret's: make one with NewPlaceholder", s.Name)
		}
		seen[s.Placeholder] = true
		s.Hosts = c.Hosts
		t.prefixed = t.prefixed && strings.HasPrefix(s.Placeholder, PlaceholderPrefix)
		t.secrets = append(t.secrets, s)
	}
	return t, nil
}

// SetSecrets replaces the secrets; connections being served see the new
// ones from their next request. Invalid secrets change nothing.
func (p *Proxy) SetSecrets(secrets []Secret) error {
	t, err := newTable(secrets)
	if err != nil {
		return err
	}
	if p.ctx.Err() != nil {
		return ErrClosed
	}
	p.table.Store(t)
	return nil
}

// Intercepts reports whether TLS connections to host are intercepted:
// some secret allows host.
func (p *Proxy) Intercepts(host string) bool { return p.anyMatch(host, false) }

// InterceptsHTTP reports whether cleartext HTTP to host is served by the
// proxy (some secret allows host over HTTP).
func (p *Proxy) InterceptsHTTP(host string) bool { return p.anyMatch(host, true) }

func (p *Proxy) anyMatch(host string, cleartext bool) bool {
	name, err := hostname.Canonical(host)
	if err != nil {
		return false
	}
	for i := range p.table.Load().secrets {
		s := &p.table.Load().secrets[i]
		if (!cleartext || s.AllowHTTP) && s.matches(name) {
			return true
		}
	}
	return false
}

// Close ends every connection being served and waits for the proxy's
// own goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.stop()
	conns := make([]*servedConn, 0, len(p.serving))
	for c := range p.serving {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	_ = p.srv.Close()
	for _, c := range conns {
		c.Close()
	}
	p.ln.Close()
	err := p.g.Wait(context.Background())
	p.tr.CloseIdleConnections()
	return err
}

// event reports e to Config.OnEvent.
func (p *Proxy) event(e Event) {
	if p.cfg.OnEvent == nil {
		return
	}
	e.Time = time.Now().UTC()
	e.Host = p.redact(hostname.Printable(e.Host))
	e.Reason = p.redact(e.Reason)
	p.cfg.OnEvent(e)
}

// anyPlaceholder matches what looks like a placeholder.
var anyPlaceholder = regexp.MustCompile(PlaceholderPrefix + "[a-z0-9]*")

// redact returns s without the secrets' values and without anything
// that looks like a placeholder (a client may put one where an event
// quotes it: a Host header, a server name).
func (p *Proxy) redact(s string) string {
	for i := range p.table.Load().secrets {
		sec := &p.table.Load().secrets[i]
		if strings.Contains(s, sec.Value) {
			s = strings.ReplaceAll(s, sec.Value, "[the value of "+sec.Name+"]")
		}
		if strings.Contains(s, sec.Placeholder) {
			s = strings.ReplaceAll(s, sec.Placeholder, "[the placeholder of "+sec.Name+"]")
		}
	}
	return anyPlaceholder.ReplaceAllString(s, "[a placeholder]")
}

// newTransport returns the transport of the upstream requests: dialled
// through Config.Dial, TLS verified against RootCAs for the URL's host,
// HTTP/1.1, connections kept alive, bodies as they come (no
// decompression).
func (p *Proxy) newTransport() *http.Transport {
	dial := func(ctx context.Context, addr string) (net.Conn, string, error) {
		host, port, err := splitHostPort(addr)
		if err != nil {
			return nil, "", err
		}
		c, err := p.cfg.Dial(ctx, host, port)
		return c, host, err
	}
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			c, _, err := dial(ctx, addr)
			return c, err
		},
		DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			c, host, err := dial(ctx, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: p.cfg.RootCAs, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, err
			}
			return tc, nil
		},
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}
