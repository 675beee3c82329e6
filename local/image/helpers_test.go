//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// requireRoot skips a test that needs root (unpacking keeps the image's
// file owners), or fails it under AGENTBOX_REQUIRE_ALL=1.
func requireRoot(t testing.TB) {
	t.Helper()
	testenv.NeedRoot(t, "needs root: unpacking layers keeps their owners")
}

func testStore(t testing.TB) *Store {
	t.Helper()
	requireRoot(t)
	s, err := Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testRegistry is go-containerregistry's registry on loopback, behind
// basic auth when user is set; wrap, when set, sees every request first.
type testRegistry struct {
	host string // 127.0.0.1:PORT
	auth authn.Authenticator
}

func newRegistry(t testing.TB, user, pass string, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	if user != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r := &testRegistry{host: strings.TrimPrefix(srv.URL, "http://"), auth: authn.Anonymous}
	if user != "" {
		r.auth = &authn.Basic{Username: user, Password: pass}
	}
	return r
}

// push writes img to repo:tag of the registry and returns the reference.
func (r *testRegistry) push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref := r.host + "/" + repoTag
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithAuth(r.auth)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// tarEntry is one entry of a layer written by a test.
type tarEntry struct {
	hdr  tar.Header
	body string
}

func dirE(name string, mode int64) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: mode}}
}

func fileE(name, body string, mode int64, uid, gid int) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Uid: uid, Gid: gid}, body: body}
}

func symlinkE(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}

func linkE(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target}}
}

// layerTar writes entries as a tar stream.
func layerTar(t testing.TB, es ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.hdr
		h.Size = int64(len(e.body))
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if h.Format == tar.FormatUnknown && len(h.PAXRecords) > 0 {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layerOf makes a (gzip) layer of a tar stream.
func layerOf(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf makes an image of layers for platform (linux/GOARCH when "")
// with config c.
func imageOf(t testing.TB, platform string, c v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	if platform != "" {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			t.Fatal(err)
		}
		cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	}
	cfg.Config = c
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// assertStoreEmpty fails unless the store holds no image, layer or
// leftover: what a failed pull must leave.
func assertStoreEmpty(t testing.TB, s *Store) {
	t.Helper()
	for _, sub := range []string{"images", "layers", "tmp", "holds"} {
		ents, err := os.ReadDir(filepath.Join(s.Dir(), sub))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(names) > 0 {
			t.Errorf("store's %s/ holds %v after a failure; want nothing", sub, names)
		}
	}
}

// mustPull pulls ref with the registry's credentials.
func mustPull(t testing.TB, s *Store, r *testRegistry, ref string) *Image {
	t.Helper()
	img, err := s.Pull(context.Background(), ref, r.opts())
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

func (r *testRegistry) opts() PullOptions {
	return PullOptions{Insecure: true, Keychain: staticKeychain{r.auth}, Transport: loopbackOnly()}
}

// loopbackOnly returns a transport that refuses to dial anything but a
// loopback address: no test reaches a public registry, even through a
// fallback (Docker Hub after failed mirrors).
func loopbackOnly() http.RoundTripper {
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("test transport: %s is not a loopback address", addr)
		}
		return d.DialContext(ctx, network, addr)
	}}
}

// staticKeychain gives one authenticator for every registry.
type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// wantErr fails unless err matches target.
func wantErr(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one matching %v", what, err, target)
	}
}
