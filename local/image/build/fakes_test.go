package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/local/image"
)

// fakeStore is a Store over real folders: layers are numbered folders,
// images a map by name.
type fakeStore struct {
	dir      string
	mu       sync.Mutex
	images   map[string]*image.Image
	n        int // layers made
	resolves int
}

func newFakeStore(t *testing.T) *fakeStore {
	t.Helper()
	s := &fakeStore{dir: t.TempDir(), images: map[string]*image.Image{}}
	if err := os.Mkdir(filepath.Join(s.dir, "layers"), 0o700); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *fakeStore) Resolve(_ context.Context, ref string) (*image.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolves++
	img, ok := s.images[ref]
	if !ok {
		return nil, fmt.Errorf("%s: %w", ref, image.ErrNotFound)
	}
	c := *img
	return &c, nil
}

func (s *fakeStore) AddLayer(_ context.Context, fill func(dir string) error) (string, error) {
	s.mu.Lock()
	s.n++
	dir := filepath.Join(s.dir, "layers", strconv.Itoa(s.n))
	s.mu.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := fill(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func (s *fakeStore) Save(_ context.Context, img *image.Image) (*image.Image, error) {
	b, _ := json.Marshal(struct {
		L []string
		C image.Config
	}{img.Layers, img.Config})
	sum := sha256.Sum256(b)
	c := *img
	c.ID = "sha256:" + hex.EncodeToString(sum[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range img.Names {
		s.images[n] = &c
	}
	return &c, nil
}

func (s *fakeStore) layers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// runCall is what fakeRunner saw of one RUN.
type runCall struct {
	step   RunStep
	layers []string
	config image.Config
	// saw is the content of /marker in the image the step ran over.
	saw string
}

// fakeRunner runs no command: it writes the file /ran/LINE (the step's
// arguments and environment) into a new layer and records the call.
type fakeRunner struct {
	store *fakeStore
	mu    sync.Mutex
	calls []runCall
	fail  bool
}

func (r *fakeRunner) Run(ctx context.Context, base *image.Image, step RunStep, logs io.Writer) (string, error) {
	saw, _ := rootView{layers: base.Layers}.readFile("/marker")
	r.mu.Lock()
	r.calls = append(r.calls, runCall{step: step, layers: slices.Clone(base.Layers), config: base.Config, saw: string(saw)})
	fail := r.fail
	r.mu.Unlock()
	fmt.Fprintf(logs, "fake run: %s\n", strings.Join(step.Args, " "))
	if fail {
		return "", fmt.Errorf("command exited with code 1")
	}
	return r.store.AddLayer(ctx, func(dir string) error {
		if err := os.Mkdir(filepath.Join(dir, "ran"), 0o755); err != nil {
			return err
		}
		content := strings.Join(step.Args, " ") + "\n" + strings.Join(step.Env, " ")
		return os.WriteFile(filepath.Join(dir, "ran", strconv.Itoa(step.Line)), []byte(content), 0o644)
	})
}

func (r *fakeRunner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// writeFiles writes files (path → content) under dir; a content
// starting with "->" makes a symbolic link.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// baseImage adds to s the image "base:1": a layer with users, a merged
// /usr (/bin → usr/bin), a sticky /tmp, and a Cmd.
func baseImage(t *testing.T, s *fakeStore) *image.Image {
	t.Helper()
	layer, err := s.AddLayer(context.Background(), func(dir string) error {
		writeFiles(t, dir, map[string]string{
			"etc/passwd":  "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n",
			"etc/group":   "root:x:0:\napp:x:1001:\nstaff:x:50:\n",
			"usr/bin/sh":  "#!fake shell",
			"bin":         "->usr/bin",
			"tmp/.keep":   "",
			"marker":      "base",
			"etc/os-name": "fake",
		})
		return os.Chmod(filepath.Join(dir, "tmp"), 0o1777)
	})
	if err != nil {
		t.Fatal(err)
	}
	img := &image.Image{ID: "sha256:base", Kind: image.KindImage, Names: []string{"base:1"}, Layers: []string{layer},
		Config: image.Config{Env: []string{"PATH=/usr/bin"}, Cmd: []string{"sh"}}}
	s.images["base:1"] = img
	return img
}
