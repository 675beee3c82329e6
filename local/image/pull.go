package image

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// PullOptions configures [Store.Pull] and [Store.Resolve].
type PullOptions struct {
	// Platform is the OS/ARCH[/VARIANT] to pull from a multi-platform
	// image ("linux/arm64"); "" is this machine's. An image for another
	// platform is refused with ErrPlatform.
	Platform string
	// Keychain finds registry credentials; nil is authn.DefaultKeychain
	// (~/.docker/config.json, its credential helpers, $DOCKER_CONFIG).
	Keychain authn.Keychain
	// Insecure talks plain HTTP to the registry (a loopback test registry)
	// and to the mirrors.
	Insecure bool
	// Mirrors are registries ("host[:port]") tried in order before Docker
	// Hub for an image of Docker Hub, as Docker's registry-mirrors: the
	// first that has the image serves all of it; Docker Hub is asked only
	// when none does.
	Mirrors []string
	// Transport carries the registry requests; nil is
	// remote.DefaultTransport (proxies from the environment).
	Transport http.RoundTripper
	// Progress, when set, is called (never concurrently) as layers are
	// fetched and unpacked.
	Progress func(Progress)
	// Names, when set, are the names the pulled image is recorded under
	// instead of the reference's own (a server keeping each client's
	// pulls apart); an image of the store named as the reference keeps
	// its name.
	Names []string
	// RegistryOnly refuses every reference but a registry's: host paths,
	// oci: layouts and tarballs fail with ErrNotRegistry, nothing read
	// (for references a server takes from its clients).
	RegistryOnly bool
}

// Progress is the state of a pull.
type Progress struct {
	// Layers is the number of layers to fetch (those not in the store
	// yet); LayersDone of them are unpacked.
	Layers, LayersDone int
	// Bytes is the size of what is fetched (compressed blobs; 0 when
	// unknown: a docker save tarball, a folder); BytesDone of it is read
	// (for a folder, of its tar stream).
	Bytes, BytesDone int64
}

// maxParallelLayers is how many layers a pull fetches and unpacks at once.
const maxParallelLayers = 3

// Pull fetches the image ref names and unpacks its layers into the store
// (a layer already there is not fetched again), then records the image
// under ref's name, taking that name from any image that had it. ref is:
//
//   - a registry reference: "alpine", "ghcr.io/org/img:tag",
//     "registry:5000/img@sha256:…", with o's platform and credentials;
//   - "oci:DIR" or "oci:DIR:TAG": an image of an OCI image layout folder;
//   - the path of a `docker save` tarball (absolute, ./ or ../, or ending
//     in .tar, .tar.gz or .tgz), gzip-compressed or not, holding one image;
//   - an absolute path of a folder: a root file system, taken as one layer.
//
// Layer digests are verified, and the uncompressed stream against the
// image's diff ids. On failure nothing is left in the store. Errors match
// ErrNotFound (no such image), ErrUnauthorized, ErrPlatform or ErrCorrupt.
func (s *Store) Pull(ctx context.Context, ref string, o PullOptions) (*Image, error) {
	want, err := o.wantPlatform()
	if err != nil {
		return nil, err
	}
	if o.RegistryOnly && (isLocalPath(ref) || strings.HasPrefix(ref, ociPrefix) || isLocalPath(canonicalName(ref))) {
		return nil, fmt.Errorf("pull %s: %w", ref, ErrNotRegistry)
	}
	for _, n := range o.Names {
		if err := checkName(n); err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, err)
		}
	}
	if isLocalPath(ref) {
		if fi, err := os.Stat(ref); err == nil && fi.IsDir() {
			return s.importFolder(ctx, ref, o)
		}
	}
	src, err := openSource(ctx, ref, o, want)
	if err != nil {
		return nil, err
	}
	if len(o.Names) > 0 {
		src.names = slices.Clone(o.Names)
	}
	img, err := s.importImage(ctx, src, o, want)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return img, nil
}

// progress serialises the Progress callback.
type progress struct {
	mu sync.Mutex
	p  Progress
	fn func(Progress)
}

func (p *progress) update(f func(*Progress)) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.p)
	p.fn(p.p)
}

// stagedLayer is a layer unpacked into the store's tmp folder, to be
// renamed into layers/ once the whole image is.
type stagedLayer struct {
	path string
	ref  layerRef
}

func (s *Store) importImage(ctx context.Context, src *source, o PullOptions, want v1.Platform) (*Image, error) {
	gc, err := lockFile(ctx, s.gcLockPath(), unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer gc.unlock()
	id, err := src.img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("read the image configuration: %w", err)
	}
	cfg, err := src.img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read the image configuration: %w", err)
	}
	if err := checkPlatform(cfg, want); err != nil {
		return nil, err
	}
	layers, err := src.img.Layers()
	if err != nil {
		return nil, fmt.Errorf("read the image manifest: %w", err)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return nil, fmt.Errorf("%w: the manifest lists %d layers, the configuration %d", ErrCorrupt, len(layers), len(cfg.RootFS.DiffIDs))
	}
	staging, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "pull-")
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	defer os.RemoveAll(staging)

	rec := &record{ID: id.String(), Kind: KindImage, Names: src.names, Config: imageConfig(cfg), Created: time.Now().UTC()}
	pr := &progress{fn: o.Progress}
	todo := s.planLayers(rec, cfg.RootFS.DiffIDs, layers, src.uncompressed, pr)
	pr.update(func(*Progress) {})
	staged, err := fetchLayers(ctx, staging, rec, todo, layers, cfg.RootFS.DiffIDs, src.uncompressed, pr)
	if err != nil {
		return nil, err
	}
	return s.commit(ctx, staged, rec, true)
}

// imageConfig is the part of an OCI configuration a sandbox applies.
func imageConfig(cfg *v1.ConfigFile) Config {
	c := cfg.Config
	return Config{Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Entrypoint: c.Entrypoint, Cmd: c.Cmd}
}

// planLayers records in rec the layers of the image (diffIDs, in the
// manifest's layers) and returns the indexes of those the store lacks, each
// once, counting them (and their compressed bytes) in pr.
func (s *Store) planLayers(rec *record, diffIDs []v1.Hash, layers []v1.Layer, uncompressed bool, pr *progress) []int {
	rec.Layers = make([]layerRef, len(layers))
	var todo []int
	seen := map[string]bool{}
	for i, diffID := range diffIDs {
		rec.Layers[i].Digest = diffID.String()
		if size, ok := s.layerSize(diffID.String()); ok {
			rec.Layers[i].Size = size
			continue
		}
		if seen[diffID.String()] {
			continue // the same layer twice in one image
		}
		seen[diffID.String()] = true
		todo = append(todo, i)
		pr.p.Layers++
		if !uncompressed {
			if n, err := layers[i].Size(); err == nil {
				pr.p.Bytes += n
			}
		}
	}
	return todo
}

// fetchLayers fetches the layers todo (indexes in layers) into staging,
// maxParallelLayers at a time, and records their sizes in rec.
func fetchLayers(ctx context.Context, staging string, rec *record, todo []int, layers []v1.Layer, diffIDs []v1.Hash, uncompressed bool, pr *progress) ([]stagedLayer, error) {
	staged := make([]stagedLayer, len(todo))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxParallelLayers)
	for k, i := range todo {
		g.Go(func() error {
			dst := filepath.Join(staging, hexOf(rec.Layers[i].Digest))
			size, err := fetchLayer(gctx, layers[i], diffIDs[i], dst, uncompressed, pr)
			if err != nil {
				return fmt.Errorf("layer %d of %d (%s): %w", i+1, len(layers), shortID(rec.Layers[i].Digest), err)
			}
			staged[k] = stagedLayer{path: dst, ref: layerRef{Digest: rec.Layers[i].Digest, Size: size}}
			pr.update(func(p *Progress) { p.LayersDone++ })
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, st := range staged {
		sizes[st.ref.Digest] = st.ref.Size
	}
	for i := range rec.Layers {
		if n, ok := sizes[rec.Layers[i].Digest]; ok {
			rec.Layers[i].Size = n
		}
	}
	return staged, nil
}

// fetchLayer unpacks layer l into the new folder dst, verifying the blob's
// digest and the tar stream's (diffID), and returns the bytes of its files.
func fetchLayer(ctx context.Context, l v1.Layer, diffID v1.Hash, dst string, uncompressed bool, pr *progress) (int64, error) {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return 0, err
	}
	var rc io.ReadCloser
	var err error
	if uncompressed {
		rc, err = l.Uncompressed()
	} else {
		rc, err = l.Compressed()
	}
	if err != nil {
		return 0, fmt.Errorf("fetch: %w", err)
	}
	defer rc.Close()
	blob := &countingReader{r: rc, pr: pr, blobHash: sha256.New()}
	stream := io.Reader(blob)
	if !uncompressed {
		dec, closeDec, err := decompress(bufio.NewReaderSize(blob, 64<<10))
		if err != nil {
			return 0, err
		}
		defer closeDec()
		stream = dec
	}
	tarHash := sha256.New()
	tee := io.TeeReader(stream, tarHash)
	size, err := unpack(ctx, tee, dst)
	if err != nil {
		return 0, err
	}
	// The tar reader stops at the end-of-archive marker: read the rest so
	// that the digests cover the whole stream and blob.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return 0, fmt.Errorf("read layer: %w", err)
	}
	if !uncompressed {
		if _, err := io.Copy(io.Discard, blob); err != nil {
			return 0, fmt.Errorf("read layer: %w", err)
		}
		want, err := l.Digest()
		if err != nil {
			return 0, err
		}
		if got := "sha256:" + hex.EncodeToString(blob.blobHash.Sum(nil)); got != want.String() {
			return 0, fmt.Errorf("%w: the blob's digest is %s, not %s", ErrCorrupt, got, want)
		}
	}
	if got := "sha256:" + hex.EncodeToString(tarHash.Sum(nil)); got != diffID.String() {
		return 0, fmt.Errorf("%w: the layer's tar stream has digest %s, the configuration says %s", ErrCorrupt, got, diffID)
	}
	return size, nil
}

// countingReader reports the bytes read from a blob and hashes them.
type countingReader struct {
	r        io.Reader
	pr       *progress
	blobHash hash.Hash
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.blobHash.Write(b[:n])
		c.pr.update(func(p *Progress) { p.BytesDone += int64(n) })
	}
	// go-containerregistry verifies registry blobs itself and reports a
	// mismatch, at the blob's end, with an error of an internal type.
	if err != nil && err != io.EOF && strings.HasPrefix(err.Error(), "error verifying ") {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return n, err
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// decompress returns the tar stream of a blob: gzip, zstd or plain tar.
func decompress(r *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := r.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.Equal(magic, zstdMagic):
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		return zr, zr.Close, nil
	}
	return r, func() {}, nil
}

// importFolder takes the root file system in folder dir as an image of one
// layer, made by writing dir as a tar stream and unpacking that (so the
// unpacker's rules apply, and the stream's digest names the layer).
func (s *Store) importFolder(ctx context.Context, dir string, o PullOptions) (*Image, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	gc, err := lockFile(ctx, s.gcLockPath(), unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer gc.unlock()
	staging, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "import-")
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	defer os.RemoveAll(staging)
	dst := filepath.Join(staging, "layer")
	if err := os.Mkdir(dst, 0o755); err != nil {
		return nil, err
	}
	pr := &progress{fn: o.Progress, p: Progress{Layers: 1}}
	pr.update(func(*Progress) {})

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := writeTar(ctx, dir, w, false)
		w.CloseWithError(err)
		done <- err
	}()
	// The tar stream is hashed, and counted as it goes (its size is not
	// known beforehand: the bar shows bytes read, Bytes stays 0).
	stream := &countingReader{r: r, pr: pr, blobHash: sha256.New()}
	size, err := unpack(ctx, stream, dst)
	if err == nil {
		_, err = io.Copy(io.Discard, stream)
	}
	r.CloseWithError(errors.New("import stopped"))
	werr := <-done
	if err == nil {
		err = werr
	}
	if err != nil {
		return nil, fmt.Errorf("import folder %s: %w", dir, err)
	}
	pr.update(func(p *Progress) { p.LayersDone = 1 })
	ref := layerRef{Digest: "sha256:" + hex.EncodeToString(stream.blobHash.Sum(nil)), Size: size}
	rec := &record{Kind: KindImage, Names: []string{dir}, Layers: []layerRef{ref}, Created: time.Now().UTC()}
	rec.ID = computeID(rec)
	return s.commit(ctx, []stagedLayer{{path: dst, ref: ref}}, rec, true)
}
