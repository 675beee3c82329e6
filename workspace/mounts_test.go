//go:build linux

package workspace_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/workspace"
)

// TestFilesystemMountsLocal: a workspace over a local sandbox with
// FilesystemMounts. Where the local engine mounts buckets (it implements
// sandbox.Mounter: on the host, bound in), the bucket is mounted at start
// and the files API reaches its objects; where it does not, the start
// still succeeds and Instructions and States say the mount is
// unsupported. Bad paths are refused up front. (The daytona engine's
// side is TestWorkspaceMounts in package daytona, over agentbox serve.)
func TestFilesystemMountsLocal(t *testing.T) {
	ctx := context.Background()
	be := s3mem.New()
	if err := be.CreateBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"Last-Modified": "Tue, 01 Dec 2026 03:00:00 GMT", "Content-Type": "text/plain"}
	if _, err := be.PutObject("bkt", "hello.txt", meta, strings.NewReader("hello from the bucket\n"), 22, nil); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gofakes3.New(be).Server()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	fs := mount.S3Filesystem{Bucket: "bkt", Region: "us-east-1", AccessKeyID: "AKIDTEST", SecretAccessKey: "local-secret-0123456789", Endpoint: "http://" + ln.Addr().String()}

	for _, bad := range []string{"data", "/proc/x", "/a/../b"} {
		if _, err := workspace.NewFilesystemMounts(map[string]sandbox.Filesystem{bad: fs}); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("mount path %q: %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := workspace.NewFilesystemMounts(map[string]sandbox.Filesystem{"/data": nil}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("a nil filesystem: %v", err)
	}

	sb := newSandbox(t)
	const p = "/tmp/bucket"
	mounts, err := workspace.NewFilesystemMounts(map[string]sandbox.Filesystem{p: fs})
	if err != nil {
		t.Fatal(err)
	}
	if got := mounts.Instructions(); !strings.Contains(got, "(mounted when the sandbox starts)") {
		t.Errorf("Instructions before the start: %q", got)
	}
	ws, err := workspace.New(workspace.Config{Sandbox: sb, Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	states := mounts.States()
	if len(states) != 1 || states[0].Path != p {
		t.Fatalf("States: %+v", states)
	}
	if strings.Contains(ws.Instructions(), fs.SecretAccessKey) || strings.Contains(states[0].Error, fs.SecretAccessKey) {
		t.Fatal("the secret shows in Instructions or States")
	}
	if _, ok := sandbox.Sandbox(sb).(sandbox.Mounter); !ok {
		if states[0].State != sandbox.MountUnsupported || !strings.Contains(ws.Instructions(), "Not mounted: "+fs.String()+" at "+p+" (unsupported: ") {
			t.Errorf("a sandbox that cannot mount: %+v; Instructions: %s", states[0], ws.Instructions())
		}
		return
	}
	if states[0].State != sandbox.MountMounted || !strings.Contains(ws.Instructions(), "Mounted filesystems: "+fs.String()+" at "+p) {
		t.Fatalf("States: %+v; Instructions: %s", states, ws.Instructions())
	}
	if b, err := ws.ReadFile(ctx, p+"/hello.txt"); err != nil || string(b) != "hello from the bucket\n" {
		t.Errorf("ReadFile through the mount: %q, %v", b, err)
	}
	if err := ws.WriteFile(ctx, p+"/new.txt", []byte("from the workspace")); err != nil {
		t.Fatal(err)
	}
	if st, err := ws.Stat(ctx, p+"/new.txt"); err != nil || st.Size != int64(len("from the workspace")) {
		t.Errorf("Stat: %+v, %v", st, err)
	}
	if list, err := ws.ReadDir(ctx, p); err != nil || len(list) != 2 {
		t.Errorf("ReadDir: %+v, %v", list, err)
	}
	if err := ws.Remove(ctx, p+"/new.txt", false); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.Unmount(ctx, sb, p); err != nil {
		t.Errorf("unmount: %v", err)
	}
}
