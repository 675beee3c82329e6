package image

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ociPrefix starts a reference to an OCI image layout folder.
const ociPrefix = "oci:"

// refNameAnnotation names an image of an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// source is an image to import, however it was found.
type source struct {
	img   v1.Image
	names []string
	// uncompressed: read the layers' tar streams as they are stored
	// (a docker save tarball), rather than their compressed blobs.
	uncompressed bool
}

// isLocalPath reports whether ref names a file or folder of this machine
// rather than a registry reference.
func isLocalPath(ref string) bool {
	return filepath.IsAbs(ref) || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") ||
		strings.HasSuffix(ref, ".tar") || strings.HasSuffix(ref, ".tar.gz") || strings.HasSuffix(ref, ".tgz")
}

// splitOCI splits "oci:DIR[:TAG]" into an absolute DIR and TAG.
func splitOCI(ref string) (dir, tag string, err error) {
	rest := strings.TrimPrefix(ref, ociPrefix)
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.Contains(rest[i+1:], "/") {
		rest, tag = rest[:i], rest[i+1:]
	}
	if rest == "" {
		return "", "", fmt.Errorf("%q: write oci:DIR or oci:DIR:TAG", ref)
	}
	dir, err = filepath.Abs(rest)
	return dir, tag, err
}

// canonicalName is the name under which ref is recorded: registry
// references fully qualified ("alpine" is
// "index.docker.io/library/alpine:latest"), paths absolute.
func canonicalName(ref string) string {
	switch {
	case strings.HasPrefix(ref, ociPrefix):
		dir, tag, err := splitOCI(ref)
		if err != nil {
			return ref
		}
		if tag != "" {
			return ociPrefix + dir + ":" + tag
		}
		return ociPrefix + dir
	case isLocalPath(ref):
		if abs, err := filepath.Abs(ref); err == nil {
			return abs
		}
		return ref
	}
	if r, err := name.ParseReference(ref); err == nil {
		return r.Name()
	}
	return ref
}

// wantPlatform parses o.Platform, defaulting to this machine's.
func (o *PullOptions) wantPlatform() (v1.Platform, error) {
	s := o.Platform
	if s == "" {
		s = runtime.GOOS + "/" + runtime.GOARCH
	}
	p, err := v1.ParsePlatform(s)
	if err != nil || p.OS == "" || p.Architecture == "" {
		return v1.Platform{}, fmt.Errorf("platform %q: write OS/ARCH[/VARIANT], e.g. linux/amd64", s)
	}
	return *p, nil
}

// openSource finds the image ref names: in an OCI layout, a docker save
// tarball or a registry.
func openSource(ctx context.Context, ref string, o PullOptions, want v1.Platform) (*source, error) {
	switch {
	case strings.HasPrefix(ref, ociPrefix):
		return openLayout(ref, want)
	case isLocalPath(ref):
		return openTarball(ref)
	}
	return openRemote(ctx, ref, o, want)
}

func openRemote(ctx context.Context, ref string, o PullOptions, want v1.Platform) (*source, error) {
	var nopts []name.Option
	if o.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return nil, fmt.Errorf("%q is not an image reference (nor oci:DIR, a .tar file or an absolute folder): %w", ref, err)
	}
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithPlatform(want)}
	if o.Transport != nil {
		ropts = append(ropts, remote.WithTransport(o.Transport))
	}
	desc, err := getDescriptor(r, o.Mirrors, nopts, ropts...)
	if err != nil {
		return nil, registryError(r, err)
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, registryError(r, err)
		}
		img, err = pickPlatform(idx, want)
		if err != nil {
			return nil, fmt.Errorf("pull %s: %w", r.Name(), err)
		}
	} else if img, err = desc.Image(); err != nil {
		return nil, registryError(r, err)
	}
	return &source{img: img, names: []string{r.Name()}}, nil
}

// getDescriptor fetches the manifest of r, from the first of mirrors that
// has it when r is an image of Docker Hub.
func getDescriptor(r name.Reference, mirrors []string, nopts []name.Option, ropts ...remote.Option) (*remote.Descriptor, error) {
	if r.Context().RegistryStr() == name.DefaultRegistry {
		sep := ":"
		if _, ok := r.(name.Digest); ok {
			sep = "@"
		}
		for _, m := range mirrors {
			mr, err := name.ParseReference(strings.TrimSuffix(m, "/")+"/"+r.Context().RepositoryStr()+sep+r.Identifier(), nopts...)
			if err != nil {
				return nil, fmt.Errorf("registry mirror %q: write HOST or HOST:PORT: %w", m, err)
			}
			if d, err := remote.Get(mr, ropts...); err == nil {
				return d, nil
			}
		}
	}
	return remote.Get(r, ropts...)
}

// registryError explains the registry's refusals: unknown image, refused
// credentials.
func registryError(r name.Reference, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("pull %s: %w (log in with docker login %s, or check the credentials of ~/.docker/config.json): %w",
				r.Name(), ErrUnauthorized, r.Context().RegistryStr(), err)
		case http.StatusNotFound:
			return fmt.Errorf("pull %s: no such image in the registry: %w: %w", r.Name(), ErrNotFound, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
				return fmt.Errorf("pull %s: no such image in the registry: %w: %w", r.Name(), ErrNotFound, err)
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return fmt.Errorf("pull %s: %w: %w", r.Name(), ErrUnauthorized, err)
			}
		}
	}
	return fmt.Errorf("pull %s: %w", r.Name(), err)
}

// pickPlatform chooses the image of idx for platform want.
func pickPlatform(idx v1.ImageIndex, want v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, m := range im.Manifests {
		if m.Platform == nil || !m.MediaType.IsImage() {
			continue
		}
		if m.Platform.Satisfies(want) {
			return idx.Image(m.Digest)
		}
		have = append(have, m.Platform.String())
	}
	if len(have) == 0 {
		have = []string{"none"}
	}
	return nil, fmt.Errorf("%w %s: the image has %s (pass another platform)", ErrPlatform, want.String(), strings.Join(have, ", "))
}

// checkPlatform refuses an image whose configuration names another
// platform than want (an image without an index says so only there).
func checkPlatform(cfg *v1.ConfigFile, want v1.Platform) error {
	if cfg.OS == "" && cfg.Architecture == "" {
		return nil // not said: take it
	}
	have := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
	if have.OS != want.OS || have.Architecture != want.Architecture ||
		want.Variant != "" && have.Variant != "" && want.Variant != have.Variant {
		return fmt.Errorf("%w %s: the image is for %s (pass another platform)", ErrPlatform, want.String(), have.String())
	}
	return nil
}

func openLayout(ref string, want v1.Platform) (*source, error) {
	dir, tag, err := splitOCI(ref)
	if err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", dir, notExist(err))
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	var pick *v1.Descriptor
	var tags []string
	for i, m := range im.Manifests {
		t := m.Annotations[refNameAnnotation]
		tags = append(tags, t)
		if tag != "" && t == tag || tag == "" && len(im.Manifests) == 1 {
			pick = &im.Manifests[i]
		}
	}
	if pick == nil {
		if tag == "" {
			return nil, fmt.Errorf("OCI layout %s holds %d images (tags %s): write oci:%s:TAG", dir, len(im.Manifests), strings.Join(tags, ", "), dir)
		}
		return nil, fmt.Errorf("OCI layout %s has no image tagged %q (it has %s): %w", dir, tag, strings.Join(tags, ", "), ErrNotFound)
	}
	var img v1.Image
	if pick.MediaType.IsIndex() {
		child, err := idx.ImageIndex(pick.Digest)
		if err != nil {
			return nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
		}
		if img, err = pickPlatform(child, want); err != nil {
			return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
		}
	} else if img, err = idx.Image(pick.Digest); err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	return &source{img: img, names: []string{canonicalName(ref)}}, nil
}

func openTarball(ref string) (*source, error) {
	p, err := filepath.Abs(ref)
	if err != nil {
		return nil, err
	}
	gz, err := isGzip(p)
	if err != nil {
		return nil, fmt.Errorf("read docker save tarball %s: %w", p, notExist(err))
	}
	opener := func() (io.ReadCloser, error) { return os.Open(p) }
	if gz {
		// `docker save | gzip`: each file of the tarball is found by
		// reading it from the start again, decompressed as it is read.
		opener = func() (io.ReadCloser, error) { return openGzip(p) }
	}
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("read docker save tarball %s: %w", p, notExist(err))
	}
	if len(m) != 1 {
		return nil, fmt.Errorf("docker save tarball %s holds %d images: save one image per file", p, len(m))
	}
	img, err := tarball.Image(opener, nil)
	if err != nil {
		return nil, fmt.Errorf("read docker save tarball %s: %w", p, err)
	}
	var names []string
	for _, t := range m[0].RepoTags {
		names = append(names, canonicalName(t))
	}
	if len(names) == 0 {
		names = []string{p}
	}
	return &source{img: img, names: names, uncompressed: true}, nil
}

// isGzip reports whether the file p starts with gzip's magic number.
func isGzip(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [2]byte
	n, _ := io.ReadFull(f, magic[:])
	return n == 2 && magic == [2]byte{0x1f, 0x8b}, nil
}

// openGzip opens the gzip-compressed file p for reading decompressed.
func openGzip(p string) (io.ReadCloser, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, f}, nil
}

// notExist marks a missing file or folder as ErrNotFound too.
func notExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w (%w)", err, ErrNotFound)
	}
	return err
}
