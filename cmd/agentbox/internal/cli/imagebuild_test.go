package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
)

// buildStore is a build.Store keeping saved images in memory; the
// Dockerfiles of these tests make no layers.
type buildStore struct{ saved []*image.Image }

func (s *buildStore) Resolve(_ context.Context, ref string) (*image.Image, error) {
	return nil, fmt.Errorf("%s: %w", ref, image.ErrNotFound)
}

func (s *buildStore) AddLayer(context.Context, func(string) error) (string, error) {
	return "", errors.New("buildStore makes no layers")
}

func (s *buildStore) Save(_ context.Context, img *image.Image) (*image.Image, error) {
	c := *img
	c.ID = "sha256:built"
	s.saved = append(s.saved, &c)
	return &c, nil
}

// runImageBuild runs agentbox with args, its image builder over store
// (none when store is nil); it returns the result and the state dir the
// builder was asked for.
func runImageBuild(t *testing.T, store *buildStore, env map[string]string, args ...string) (result, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	var asked string
	cfg := Config{Engine: newFakeEngine(t), Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] }}
	if store != nil {
		cfg.ImageBuilder = func(_ context.Context, stateDir string) (*build.Builder, error) {
			asked = stateDir
			return &build.Builder{Store: store}, nil
		}
	}
	code := Run(context.Background(), cfg, args)
	return result{code, stdout.String(), stderr.String()}, asked
}

func TestImageBuildNotWired(t *testing.T) {
	r, _ := runImageBuild(t, nil, nil, "--state-dir", t.TempDir(), "image", "build", t.TempDir())
	if r.code != ExitError || !strings.Contains(r.stderr, "image build is not wired into this agentbox") {
		t.Errorf("got %v, want exit 1 saying image build is not wired", r)
	}
}

func TestImageBuildSavesTheImage(t *testing.T) {
	ctxDir := t.TempDir()
	df := filepath.Join(t.TempDir(), "Dockerfile.dev")
	if err := os.WriteFile(df, []byte("FROM scratch\nARG V\nARG FROMENV\nENV V=$V E=$FROMENV\nCMD [\"run\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	store := &buildStore{}
	r, asked := runImageBuild(t, store, map[string]string{"FROMENV": "env-value"},
		"--state-dir", stateDir, "--json", "image", "build", "-f", df, "-t", "app:1", "-t", "app:latest", "--build-arg", "V=1", "--build-arg", "FROMENV", ctxDir)
	if r.code != 0 {
		t.Fatalf("image build: %v", r)
	}
	if asked != stateDir {
		t.Errorf("builder asked for state dir %q, want %q", asked, stateDir)
	}
	var img image.Image
	if err := json.Unmarshal([]byte(r.stdout), &img); err != nil {
		t.Fatalf("--json output %q: %v", r.stdout, err)
	}
	want := image.Config{Env: []string{"V=1", "E=env-value"}, Cmd: []string{"run"}}
	if img.ID != "sha256:built" || !reflect.DeepEqual(img.Names, []string{"app:1", "app:latest"}) || !reflect.DeepEqual(img.Config, want) {
		t.Errorf("printed image %+v, want names app:1 app:latest and config %+v", img, want)
	}
	if len(store.saved) != 1 {
		t.Errorf("%d images saved, want 1", len(store.saved))
	}
	for _, line := range []string{"Step 1/5 : FROM scratch", "Step 5/5 : CMD [\"run\"]", "Successfully tagged app:latest"} {
		if !strings.Contains(r.stderr, line) {
			t.Errorf("logs (stderr under --json) lack %q: %q", line, r.stderr)
		}
	}
}

func TestImageBuildErrors(t *testing.T) {
	ctxDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM scratch\nVOLUME /data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromMissing := t.TempDir()
	if err := os.WriteFile(filepath.Join(fromMissing, "Dockerfile"), []byte("FROM nothere:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{ctxDir}, ExitError, "Dockerfile line 2: VOLUME: unknown or unsupported instruction"},
		{[]string{"--json", fromMissing}, ExitError, `"code":"not_found"`},
		{[]string{t.TempDir()}, ExitError, "no Dockerfile at"},
		{[]string{"--network", "host", ctxDir}, ExitUsage, `--network "host": use default or none`},
		{[]string{"--build-arg", "1X=secret", ctxDir}, ExitUsage, "--build-arg #1: invalid name"},
		{[]string{"a", "b"}, ExitUsage, "at most one CONTEXT"},
	} {
		r, _ := runImageBuild(t, &buildStore{}, nil, append([]string{"--state-dir", t.TempDir(), "image", "build"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("image build %q: %v, want exit %d and %q", tc.args, r, tc.code, tc.want)
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("a build argument's value shows in %q", r.stderr)
		}
	}
}
