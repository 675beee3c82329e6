//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/procfs"
	"github.com/agentbox-dev/agentbox/internal/s3test"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// needFUSE skips (fails under AGENTBOX_REQUIRE_ALL=1) unless this test
// runs as root with the FUSE tool and /dev/fuse.
func needFUSE(t *testing.T, tool string) {
	t.Helper()
	skipUnless(t, os.Geteuid() == 0, "bucket mounts need root")
	_, err := exec.LookPath(tool)
	skipUnless(t, err == nil, tool+" is not installed")
	_, err = os.Stat("/dev/fuse")
	skipUnless(t, err == nil, "/dev/fuse is missing")
}

func s3Filesystem(srv *s3test.Server, bucket string) *mount.S3Filesystem {
	return &mount.S3Filesystem{Bucket: bucket, Region: srv.Region, Endpoint: srv.URL, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}
}

// fuseTools returns the pids of the FUSE tools running with path (a
// sandbox's folder) in their arguments.
func fuseTools(t *testing.T, path string) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(path)) {
			continue
		}
		if s, err := procfs.ReadStat(pid); err == nil && s.Live() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func readObject(t *testing.T, b mount.Bucket, name string) string {
	t.Helper()
	r, err := b.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

func writeObject(t *testing.T, b mount.Bucket, name, content string) {
	t.Helper()
	w, err := b.Create(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, content)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// An S3 bucket mounted with s3fs on the host: what the sandbox writes is
// in the bucket and back; the mount survives stop and start, and leaves
// no tool or credential behind after Unmount and Destroy.
func TestMountS3(t *testing.T) {
	needFUSE(t, "s3fs")
	ctx := context.Background()
	srv := s3test.Start(t, "data")
	stateDir := newStateDir(t)
	sb := newSandbox(t, local.Options{ID: "mount-s3", StateDir: stateDir})
	fsys := s3Filesystem(srv, "data")
	bucket, err := mount.Open(ctx, fsys)
	if err != nil {
		t.Fatal(err)
	}
	home := mustRun(t, sb, "printf %s $HOME")
	at := home + "/bucket"
	if err := sb.Mount(ctx, fsys, at); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	mustRun(t, sb, "echo from-sandbox > "+at+"/a.txt && mkdir -p "+at+"/dir && echo nested > "+at+"/dir/b.txt")
	if got := readObject(t, bucket, "a.txt"); got != "from-sandbox\n" {
		t.Fatalf("object written in the sandbox = %q", got)
	}
	writeObject(t, bucket, "from-host.txt", "from-bucket-api")
	if got := mustRun(t, sb, "cat "+at+"/from-host.txt; stat -c %U "+at+"/a.txt"); got != "from-bucket-api"+mustRun(t, sb, "id -un") {
		t.Fatalf("read in the sandbox = %q", got)
	}
	infos, err := sb.Mounts(ctx)
	if err != nil || len(infos) != 1 || infos[0].State != sandbox.MountMounted || infos[0].Path != at || infos[0].Kind != "s3" {
		t.Fatalf("Mounts = %+v, %v", infos, err)
	}
	sandboxDir := filepath.Join(stateDir, "sandboxes", "mount-s3")
	tools := fuseTools(t, sandboxDir)
	if len(tools) != 1 {
		t.Fatalf("FUSE tools of the sandbox: %v, want 1", tools)
	}

	// Stop ends the tool; start mounts the bucket again.
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left := fuseTools(t, sandboxDir); len(left) != 0 {
		t.Fatalf("FUSE tools left after Stop: %v", left)
	}
	if infos, _ := sb.Mounts(ctx); len(infos) != 1 || infos[0].State != sandbox.MountPending {
		t.Fatalf("Mounts of the stopped sandbox = %+v", infos)
	}
	if got := mustRun(t, sb, "cat "+at+"/dir/b.txt"); got != "nested\n" {
		t.Fatalf("after stop and start: %q", got)
	}
	if infos, _ := sb.Mounts(ctx); len(infos) != 1 || infos[0].State != sandbox.MountMounted {
		t.Fatalf("Mounts after restart = %+v", infos)
	}

	// Unmount: the path is an empty folder again, the tool and the
	// credentials are gone.
	if err := sb.Unmount(ctx, at); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, sb, "ls -A "+at+"; grep -c ' "+at+" ' /proc/mounts || true"); got != "0\n" {
		t.Fatalf("after Unmount: %q", got)
	}
	if left := fuseTools(t, sandboxDir); len(left) != 0 {
		t.Fatalf("FUSE tools left after Unmount: %v", left)
	}
	if ents, _ := os.ReadDir(filepath.Join(sandboxDir, "mounts")); len(ents) != 0 {
		t.Fatalf("mount folders left after Unmount: %v", ents)
	}
	if err := sb.Unmount(ctx, at); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Unmount again = %v, want ErrNotFound", err)
	}

	// Destroy with a mount in place leaves no tool.
	if err := sb.Mount(ctx, fsys, at); err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if left := fuseTools(t, sandboxDir); len(left) != 0 {
		t.Fatalf("FUSE tools left after Destroy: %v", left)
	}
	if !strings.Contains(readObject(t, bucket, "a.txt"), "from-sandbox") {
		t.Fatal("the bucket lost its objects")
	}
}
