//go:build linux

package workspace_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/workspace"
)

func TestMain(m *testing.M) { localtest.Main(m) }

func newSandbox(t *testing.T) *local.Sandbox { return localtest.NewSandbox(t, "ws") }

type fakeMounts struct{ calls int }

func (f *fakeMounts) Mount(context.Context, sandbox.Sandbox) error { f.calls++; return nil }
func (f *fakeMounts) Instructions() string                         { return "Bucket data is mounted at /data." }

func TestFiles(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t)
	mounts := &fakeMounts{}
	ws, err := workspace.New(workspace.Config{Sandbox: sb, WorkingDirectory: "/tmp/proj", Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile(ctx, "src/a.txt", []byte("hello\nworld\n")); err != nil {
		t.Fatal(err)
	}
	if mounts.calls != 1 {
		t.Errorf("Mount called %d times, want 1 (at the first start)", mounts.calls)
	}
	data, err := ws.ReadFile(ctx, "/tmp/proj/src/a.txt")
	if err != nil || string(data) != "hello\nworld\n" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	fi, err := ws.Stat(ctx, "src/a.txt")
	if err != nil || fi.Path != "/tmp/proj/src/a.txt" || fi.Size != 12 || fi.IsDir {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	list, err := ws.ReadDir(ctx, "src")
	if err != nil || len(list) != 1 || list[0].Name != "a.txt" || list[0].Path != "/tmp/proj/src/a.txt" {
		t.Fatalf("ReadDir = %+v, %v", list, err)
	}
	m, err := ws.Find(ctx, ".", "world")
	if err != nil || len(m) != 1 || m[0].Line != 2 || !strings.HasSuffix(m[0].File, "src/a.txt") {
		t.Fatalf("Find = %+v, %v", m, err)
	}
	r, err := ws.ExecuteCommand(ctx, "pwd; cat src/a.txt | wc -l", nil, nil)
	if err != nil || r.Stdout != "/tmp/proj\n2\n" {
		t.Fatalf("command in the working directory: %+v, %v", r, err)
	}
	if err := ws.Remove(ctx, "src", true); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Stat(ctx, "src/a.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Stat after Remove: %v, want ErrNotFound", err)
	}
	if err := ws.Remove(ctx, "/", true); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("Remove(/) = %v, want ErrInvalidArgument", err)
	}
	in := ws.Instructions()
	for _, want := range []string{sb.Instructions(), "working directory /tmp/proj", "Bucket data is mounted at /data."} {
		if !strings.Contains(in, want) {
			t.Errorf("Instructions lack %q:\n%s", want, in)
		}
	}
}

func TestDefaultWorkingDirectory(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t)
	ws, err := workspace.New(workspace.Config{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	wd, err := ws.WorkingDirectory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ws.ExecuteCommand(ctx, "pwd", nil, &sandbox.ExecOptions{Cwd: "."})
	if err != nil || strings.TrimSpace(r.Stdout) != wd {
		t.Fatalf("pwd with cwd . = %+v, %v; want %s", r, err, wd)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := workspace.New(workspace.Config{}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("no sandbox: %v", err)
	}
}

func TestMountsAfterEachStart(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t)
	mounts := &fakeMounts{}
	ws, err := workspace.New(workspace.Config{Sandbox: sb, WorkingDirectory: "/tmp/m", Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ws.ReadDir(ctx, "."); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.ReadDir(ctx, "."); err != nil {
		t.Fatal(err)
	}
	if mounts.calls != 2 {
		t.Fatalf("Mount called %d times over two starts, want 2", mounts.calls)
	}
}
