package toolbox_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// writeFiles creates files (path → content) in dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	tree := fstest.MapFS{}
	for p, content := range files {
		tree[p] = &fstest.MapFile{Data: []byte(content), Mode: 0o644}
	}
	if err := os.CopyFS(dir, tree); err != nil {
		t.Fatal(err)
	}
}

func TestClientFindInFiles(t *testing.T) {
	c, work := daemonEnv(t, plain, toolbox.ClientOptions{})
	writeFiles(t, work, map[string]string{"a.txt": "x\nTODO: y\n", "b/c.txt": "TODO"})
	got, err := c.FindInFiles(context.Background(), work, "TODO")
	want := []toolbox.Match{{File: filepath.Join(work, "a.txt"), Line: 2, Content: "TODO: y"}, {File: filepath.Join(work, "b/c.txt"), Line: 1, Content: "TODO"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("FindInFiles = %+v, %v", got, err)
	}
}

func TestClientSearchFiles(t *testing.T) {
	c, work := daemonEnv(t, plain, toolbox.ClientOptions{})
	writeFiles(t, work, map[string]string{"a.go": "", "b/c.go": "", "b/d.txt": ""})
	got, err := c.SearchFiles(context.Background(), work, "*.go")
	if err != nil || !slices.Equal(got, []string{filepath.Join(work, "a.go"), filepath.Join(work, "b/c.go")}) {
		t.Errorf("SearchFiles = %q, %v", got, err)
	}
}

func TestClientReplaceInFiles(t *testing.T) {
	c, work := daemonEnv(t, plain, toolbox.ClientOptions{})
	writeFiles(t, work, map[string]string{"a.txt": "old old"})
	got, err := c.ReplaceInFiles(context.Background(), []string{"a.txt", "missing"}, "old", "new")
	if err != nil || len(got) != 2 || !got[0].Success || got[1].Success || got[1].Error == "" {
		t.Fatalf("ReplaceInFiles = %+v, %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "a.txt")); string(b) != "new new" {
		t.Errorf("content %q", b)
	}
}

func TestClientSetFilePermissions(t *testing.T) {
	c, work := daemonEnv(t, plain, toolbox.ClientOptions{})
	writeFiles(t, work, map[string]string{"run.sh": ""})
	err := c.SetFilePermissions(context.Background(), "run.sh", toolbox.FilePermissions{Mode: 0o750 | fs.ModeSetgid, SetMode: true})
	if fi, _ := os.Stat(filepath.Join(work, "run.sh")); err != nil || fi.Mode() != 0o750|fs.ModeSetgid {
		t.Errorf("SetFilePermissions: %v; mode %v", err, fi.Mode())
	}
}

// Server-side refusals come back as *APIError with the status: 400 for an
// invalid pattern or variable name, 404 for a missing file. (The spec
// declares no 400 for POST /env: this server is not validated.)
func TestClientServerErrors(t *testing.T) {
	c, _ := daemonEnvV(t, plain, false, toolbox.ClientOptions{})
	ctx := context.Background()
	var ae *toolbox.APIError
	if _, err := c.SearchFiles(ctx, ".", "[bad"); !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Errorf("SearchFiles with a bad glob: %v", err)
	}
	if _, err := c.FindInFiles(ctx, ".", "two\nlines"); !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Errorf("FindInFiles across lines: %v", err)
	}
	if err := c.SetFilePermissions(ctx, "missing", toolbox.FilePermissions{Owner: "0"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("SetFilePermissions of a missing file: %v", err)
	}
	if err := c.UpdateEnv(ctx, toolbox.UpdateEnvRequest{Set: map[string]string{"A-B": "x"}}); !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Errorf("UpdateEnv with a bad name: %v", err)
	}
}

// Arguments that cannot be right fail before any request.
func TestClientFileOpsInvalidArguments(t *testing.T) {
	c, _ := daemonEnv(t, plain, toolbox.ClientOptions{})
	ctx := context.Background()
	for name, err := range map[string]error{
		"find empty pattern":   second(c.FindInFiles(ctx, ".", "")),
		"find empty path":      second(c.FindInFiles(ctx, "", "x")),
		"search empty pattern": second(c.SearchFiles(ctx, ".", "")),
		"replace no files":     second(c.ReplaceInFiles(ctx, nil, "a", "b")),
		"replace empty":        second(c.ReplaceInFiles(ctx, []string{"a"}, "", "b")),
		"replace NUL path":     second(c.ReplaceInFiles(ctx, []string{"a\x00"}, "a", "b")),
		"permissions nothing":  c.SetFilePermissions(ctx, "a", toolbox.FilePermissions{}),
		"permissions bad mode": c.SetFilePermissions(ctx, "a", toolbox.FilePermissions{Mode: fs.ModeDir | 0o755, SetMode: true}),
		"permissions owner":    c.SetFilePermissions(ctx, "a", toolbox.FilePermissions{Owner: "a:b"}),
	} {
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
