//go:build linux

package mounttest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/procfs"
	"github.com/agentbox-dev/agentbox/internal/s3test"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/mount/bucket"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// needFUSE skips (fails under AGENTBOX_REQUIRE_ALL=1) unless this test
// runs as root with the FUSE tool and /dev/fuse.
func needFUSE(t *testing.T, tool string) {
	t.Helper()
	testenv.NeedRoot(t, "bucket mounts need root")
	testenv.NeedTool(t, tool, tool)
	testenv.NeedFile(t, "/dev/fuse", "bucket mounts need /dev/fuse")
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

func readObject(t *testing.T, b bucket.Bucket, name string) string {
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

func writeObject(t *testing.T, b bucket.Bucket, name, content string) {
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
	bucket, err := bucket.Open(ctx, fsys)
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

// The credentials never enter the sandbox (no process's argv or
// environment, no file), nor the tool's argv, logs or errors; another
// sandbox can neither see the tool nor unmount the bucket.
func TestMountCredentialsStayOut(t *testing.T) {
	needFUSE(t, "s3fs")
	ctx := context.Background()
	srv := s3test.Start(t, "data")
	stateDir := newStateDir(t)
	a := newSandbox(t, local.Options{ID: "mount-a", StateDir: stateDir})
	b := newSandbox(t, local.Options{ID: "mount-b", StateDir: stateDir})
	fsys := s3Filesystem(srv, "data")
	at := mustRun(t, a, "printf %s $HOME") + "/bucket"
	if err := a.Mount(ctx, fsys, at); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	mustRun(t, a, "echo hi > "+at+"/x")
	secrets := []string{srv.SecretAccessKey, srv.AccessKeyID}
	for _, sb := range []*local.Sandbox{a, b} {
		// Every process's argv and environment, read here; files searched
		// with the secrets as a pattern file on stdin (not in an argv).
		procs := mustRun(t, sb, "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'")
		r, err := sb.ExecuteCommand(ctx, "grep -rlsFf /dev/stdin $HOME /tmp /etc /run 2>/dev/null | head -3", nil, &sandbox.ExecOptions{Stdin: strings.NewReader(strings.Join(secrets, "\n") + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(procs, "PATH=") {
			t.Fatalf("the probe read no environment: %q", procs)
		}
		for _, sec := range secrets {
			if strings.Contains(procs, sec) {
				t.Fatalf("a process of sandbox %s holds a credential", sb.ID())
			}
		}
		if r.Stdout != "" {
			t.Fatalf("files of sandbox %s hold a credential: %q", sb.ID(), r.Stdout)
		}
	}
	sandboxDir := filepath.Join(stateDir, "sandboxes", "mount-a")
	tools := fuseTools(t, sandboxDir)
	if len(tools) != 1 {
		t.Fatalf("tools: %v", tools)
	}
	argv, _ := os.ReadFile("/proc/" + strconv.Itoa(tools[0]) + "/cmdline")
	environ, _ := os.ReadFile("/proc/" + strconv.Itoa(tools[0]) + "/environ")
	meta, _ := os.ReadFile(filepath.Join(sandboxDir, "meta.json"))
	var logs []byte
	filepath.Walk(filepath.Join(sandboxDir, "mounts"), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if fi.IsDir() && fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v, want 0700", p, fi.Mode().Perm())
		}
		if fi.Mode().IsRegular() {
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
			}
			if filepath.Base(p) == "tool.log" {
				logs, _ = os.ReadFile(p)
			}
		}
		return nil
	})
	info, _ := a.Info(ctx)
	infoText := fmt.Sprintf("%+v", info.Mounts)
	for _, sec := range secrets {
		for what, b := range map[string][]byte{"tool argv": argv, "tool environment": environ, "meta.json": meta, "tool log": logs, "Info": []byte(infoText)} {
			if bytes.Contains(b, []byte(sec)) {
				t.Errorf("%s holds a credential", what)
			}
		}
	}
	// Sandbox b sees neither the tool nor the mount, and cannot unmount it.
	if got := run(t, b, "ls /proc | grep -qx "+strconv.Itoa(tools[0])+" && echo seen; umount "+at+"; fusermount -u "+at+"; fusermount3 -u "+at+"; true"); strings.Contains(got.Stdout, "seen") {
		t.Fatal("sandbox b sees a's FUSE tool")
	}
	if got := mustRun(t, a, "cat "+at+"/x"); got != "hi\n" {
		t.Fatalf("a's mount after b's attempts: %q", got)
	}
	if got := mustRun(t, b, "ls -A "+at+" 2>/dev/null; echo end"); got != "end\n" {
		t.Fatalf("b sees %q in %s", got, at)
	}
}

// Bad input fails clearly, before or after the tool runs, and leaves the
// sandbox and its other mounts as they were.
func TestMountBadInput(t *testing.T) {
	needFUSE(t, "s3fs")
	ctx := context.Background()
	srv := s3test.Start(t, "data", "other")
	sb := newSandbox(t, local.Options{ID: "mount-bad", StateDir: newStateDir(t)})
	home := mustRun(t, sb, "printf %s $HOME")
	if err := sb.Mount(ctx, s3Filesystem(srv, "other"), "/tmp/other"); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	mustRun(t, sb, "echo kept > /tmp/other/k")
	for _, p := range []string{"../x", "/data/../etc", "/proc", "/proc/self", "/", home, "relative", "/sys/x", "/a b"} {
		err := sb.Mount(ctx, s3Filesystem(srv, "data"), p)
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("Mount at %q = %v, want ErrInvalidArgument", p, err)
		}
	}
	mustRun(t, sb, "mkdir -p /tmp/full && echo x > /tmp/full/f")
	if err := sb.Mount(ctx, s3Filesystem(srv, "data"), "/tmp/full"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Mount on a non-empty folder = %v", err)
	}
	if err := sb.Mount(ctx, s3Filesystem(srv, "no-such-bucket"), "/tmp/missing"); err == nil || !strings.Contains(err.Error(), "bucket") {
		t.Errorf("Mount of a missing bucket = %v", err)
	} else {
		t.Logf("missing bucket: %v", err)
	}
	wrong := s3Filesystem(srv, "data")
	wrong.AccessKeyID, wrong.SecretAccessKey = "AKIAWRONG00000000000", "wrong-secret-4d7e1c"
	err := sb.Mount(ctx, wrong, "/tmp/wrong")
	if err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("Mount with wrong credentials = %v", err)
	} else if strings.Contains(err.Error(), "wrong-secret-4d7e1c") {
		t.Errorf("the error shows the secret: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if err := sb.Mount(ctx, s3Filesystem(srv, "data"), "/tmp/notool"); !errors.Is(err, mount.ErrToolNotFound) {
		t.Errorf("Mount without s3fs = %v, want ErrToolNotFound", err)
	}
	infos, err := sb.Mounts(ctx)
	if err != nil || len(infos) != 1 || infos[0].Path != "/tmp/other" || infos[0].State != sandbox.MountMounted {
		t.Fatalf("Mounts after the failures = %+v, %v; want only /tmp/other, mounted", infos, err)
	}
	if got := mustRun(t, sb, "cat /tmp/other/k; echo ok"); got != "kept\nok\n" {
		t.Fatalf("the sandbox or its mount after the failures: %q", got)
	}
	if left := fuseTools(t, filepath.Join(sb.StateDir(), "sandboxes", "mount-bad")); len(left) != 1 {
		t.Fatalf("FUSE tools: %v, want the one of /tmp/other", left)
	}
}
