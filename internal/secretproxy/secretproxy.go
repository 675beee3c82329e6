// Package secretproxy swaps a sandbox's secret placeholders for their
// values in the requests that leave the sandbox for the hosts each secret
// allows, and nowhere else.
//
// A sandbox's environment holds, for each of its secrets, an opaque
// placeholder (NewPlaceholder). A [Proxy] sees the sandbox's outbound
// connections to the secrets' hosts (handed to it by the egress proxy of
// a domain allow list, for CONNECT and absolute-URI requests, or by a
// firewall redirect, [Proxy.ServeTransparent]); for TLS it terminates the
// connection with a certificate for the host signed by the state dir's
// [CA] (which the sandbox trusts; its key never enters a sandbox),
// replaces placeholders in the request line, the headers and bodies up
// to [Config.MaxBody], and forwards the request over TLS to the real
// host, whose certificate it verifies against the host's trust store.
//
// A placeholder goes out unchanged, and an [Event] is reported, when it
// is sent to a host its secret does not allow, or in cleartext when the
// secret allows TLS only.
//
// (Contract file written by the lead: the signatures are agreed between
// the packages that use them; the bodies are the owner's to write.)
package secretproxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// DefaultMaxBody is the default of [Config.MaxBody].
const DefaultMaxBody = 1 << 20

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "agentbox_secret_"

// ErrUnimplemented is returned by the contract's stubs.
var ErrUnimplemented = errors.New("secretproxy: not implemented yet")

// NewPlaceholder returns a new random placeholder: PlaceholderPrefix and
// 32 lower-case letters and digits (160 bits), which survive URL and
// shell quoting unchanged.
func NewPlaceholder() string { panic("unimplemented") }

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
type Proxy struct{ cfg Config }

// New returns a proxy configured by c.
func New(c Config) (*Proxy, error) { return nil, ErrUnimplemented }

// SetSecrets replaces the secrets; connections being served see the new
// ones from their next request.
func (p *Proxy) SetSecrets(secrets []Secret) error { return ErrUnimplemented }

// Intercepts reports whether TLS connections to host are intercepted:
// some secret allows host.
func (p *Proxy) Intercepts(host string) bool { return false }

// InterceptsHTTP reports whether cleartext HTTP to host is served by the
// proxy (some secret allows host over HTTP).
func (p *Proxy) InterceptsHTTP(host string) bool { return false }

// Rewrite replaces in req (URL, headers, a body up to MaxBody) the
// placeholders of the secrets that allow host (over tls or not), and
// reports an Event for each other placeholder it sees. For proxies that
// parse requests themselves (the egress proxy's absolute-URI forwarding).
func (p *Proxy) Rewrite(req *http.Request, host string, tls bool) error { return ErrUnimplemented }

// ServeTLS serves conn, a client connection whose next bytes are a TLS
// ClientHello for host, as host: it terminates TLS with a certificate for
// host, substitutes, and forwards each request to host:port over
// verified TLS. It closes conn when done.
func (p *Proxy) ServeTLS(ctx context.Context, conn net.Conn, host string, port uint16) { conn.Close() }

// ServeHTTP serves conn, a cleartext HTTP/1.1 client connection to
// host:port. It closes conn when done.
func (p *Proxy) ServeHTTP(ctx context.Context, conn net.Conn, host string, port uint16) { conn.Close() }

// ServeTransparent serves conn, redirected by a firewall from its original
// destination orig: a TLS ClientHello whose server name Intercepts is
// served by ServeTLS (port orig.Port), a cleartext request whose Host
// InterceptsHTTP by ServeHTTP; anything else is relayed unchanged to orig
// over a connection from passThrough. It closes conn when done.
func (p *Proxy) ServeTransparent(ctx context.Context, conn net.Conn, orig netip.AddrPort, passThrough func(context.Context) (net.Conn, error)) {
	conn.Close()
}

// Close ends every connection being served.
func (p *Proxy) Close() error { return nil }

// CA is the certificate authority of a state dir whose certificates the
// sandboxes trust for their secrets' hosts.
type CA struct{}

// LoadOrCreateCA returns the CA kept in dir (ca.pem, and ca-key.pem mode
// 0600), making it the first time (atomically: racing callers get one).
func LoadOrCreateCA(dir string) (*CA, error) { return nil, ErrUnimplemented }

// ParseCA returns the CA of a PEM certificate and PEM private key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) { return nil, ErrUnimplemented }

// CertPEM returns the CA's certificate, PEM: what sandboxes trust.
func (ca *CA) CertPEM() []byte { return nil }
