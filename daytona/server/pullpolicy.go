package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
	"github.com/google/go-containerregistry/pkg/authn"
)

// imagePolicy is what the images of tenants' builds may come from
// (tenancy.go): the operator's published images, and registries, pulled
// anonymously, on public addresses unless allowed.
type imagePolicy struct {
	// published are the names of the operator's images every
	// organization may use (Options.PublishedImages).
	published []string
	// allowRegistries are the registries (HOST:PORT as in references)
	// builds may pull from although they are on loopback or private
	// addresses (Options.AllowRegistries).
	allowRegistries []string
	logf            func(string, ...any)
	// transport, when set, carries the pulls instead (tests).
	testTransport http.RoundTripper
}

// isPublished reports whether name is an image the operator published.
func (p *imagePolicy) isPublished(name string) bool {
	return p != nil && slices.Contains(p.published, name)
}

// errPrivateAddress is why a pull to a loopback, private or link-local
// address was refused.
var errPrivateAddress = errors.New("the registry is on a loopback or private address, which the operator has not allowed (agentbox serve --allow-registry HOST:PORT)")

// publicAddr reports whether a is an address of the internet at large:
// not loopback, private (RFC 1918, RFC 4193, CGNAT), link-local,
// multicast or unspecified.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() &&
		!netip.MustParsePrefix("100.64.0.0/10").Contains(a)
}

// transport returns the HTTP transport of tenants' pulls: no proxy from
// the environment, and every connection to a private address refused,
// the address checked as dialled (after DNS), but for the allowed
// registries.
func (p *imagePolicy) transport() http.RoundTripper {
	if p != nil && p.testTransport != nil {
		return p.testTransport
	}
	guarded := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !publicAddr(ap.Addr()) {
				return errPrivateAddress
			}
			return nil
		}}
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	var allowed []string
	if p != nil {
		allowed = p.allowRegistries
	}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if slices.Contains(allowed, addr) || slices.Contains(allowed, withDefaultPort(addr)) {
				return plain.DialContext(ctx, network, addr)
			}
			return guarded.DialContext(ctx, network, addr)
		},
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Minute,
	}
}

// withDefaultPort strips the HTTPS port from addr (HOST:443 is written
// HOST in references).
func withDefaultPort(addr string) string {
	if h, port, err := net.SplitHostPort(addr); err == nil && port == "443" {
		return h
	}
	return addr
}

// tenantStore is the image store of one organization's build: its
// Resolve finds what tenancy.go says a reference of the organization
// names, and nothing else; AddLayer and Save are the builder's store's.
type tenantStore struct {
	build.Store
	st  *image.Store
	org string
	pol *imagePolicy
}

// Resolve returns the image ref names for the organization: its
// snapshot, a published image, or its pull of a registry reference.
func (t tenantStore) Resolve(ctx context.Context, ref string) (*image.Image, error) {
	if img, err := exactImage(ctx, t.st, orgImageName(t.org, ref)); !errors.Is(err, image.ErrNotFound) {
		return img, err
	}
	if t.pol.isPublished(ref) {
		return exactImage(ctx, t.st, ref)
	}
	canonical, err := checkImageRef(ref)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			return nil, errors.New(he.Message)
		}
		return nil, err
	}
	pn := pullImageName(t.org, canonical)
	if img, err := exactImage(ctx, t.st, pn); !errors.Is(err, image.ErrNotFound) {
		return img, err
	}
	img, err := t.st.Pull(ctx, canonical, image.PullOptions{
		Names: []string{pn}, RegistryOnly: true,
		Keychain:  authn.NewMultiKeychain(), // anonymous: not the operator's credentials
		Transport: t.pol.transport(),
	})
	if err != nil {
		return nil, t.pullFailure(canonical, err)
	}
	return img, nil
}

// pullFailure is the error of a failed pull as tenants read it: our own
// words, not the registry's answer (logged for the operator).
func (t tenantStore) pullFailure(ref string, err error) error {
	if t.pol != nil && t.pol.logf != nil {
		t.pol.logf("agentbox serve: organization %s: pull %s: %v", t.org, ref, err)
	}
	switch {
	case errors.Is(err, errPrivateAddress):
		return fmt.Errorf("pull %s: %w", ref, errPrivateAddress)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("pull %s: %w", ref, err)
	case errors.Is(err, image.ErrNotFound):
		return fmt.Errorf("pull %s: no such image in the registry", ref)
	case errors.Is(err, image.ErrUnauthorized):
		return fmt.Errorf("pull %s: the registry asks for credentials, and agentbox serve pulls anonymously: use a public image", ref)
	case errors.Is(err, image.ErrPlatform):
		return fmt.Errorf("pull %s: the image has no variant for this server's platform", ref)
	case errors.Is(err, image.ErrNoSpace):
		return fmt.Errorf("pull %s: %w", ref, image.ErrNoSpace)
	}
	return fmt.Errorf("pull %s: the registry could not be reached or its answer was not an image (the server's log says more)", ref)
}

// exactImage returns the image of st named exactly name: never one found
// by another spelling of a reference, by id or by a prefix of one.
func exactImage(ctx context.Context, st *image.Store, name string) (*image.Image, error) {
	imgs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, img := range imgs {
		if slices.Contains(img.Names, name) {
			return img, nil
		}
	}
	return nil, fmt.Errorf("%q: %w", name, image.ErrNotFound)
}
