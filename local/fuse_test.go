//go:build linux

package local_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
)

// listenInSandbox listens on 127.0.0.1 of the network namespace of the
// sandbox whose init is pid: a host service only that sandbox reaches.
func listenInSandbox(t *testing.T, pid int) net.Listener {
	t.Helper()
	var ln net.Listener
	err := onThread(func() error {
		fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	if err != nil {
		t.Fatalf("listen in the sandbox's network: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serveS3 serves an in-memory S3 server with bucket "bkt" (holding
// hello.txt) on 127.0.0.1 inside the sandbox sb, and returns its URL and
// backend.
func serveS3(t *testing.T, sb *local.Sandbox) (string, *s3mem.Backend) {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	if _, err := be.PutObject("bkt", "hello.txt", objectMeta, strings.NewReader("hello from the bucket\n"), 22, nil); err != nil {
		t.Fatal(err)
	}
	ln := listenInSandbox(t, local.InitPID(sb))
	srv := &http.Server{Handler: gofakes3.New(be).Server()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), be
}

// objectMeta is the metadata of objects put straight into the backend:
// gofakes3 answers HEAD with Last-Modified only when the metadata has it,
// and s3fs reads zeros from an object without one.
var objectMeta = map[string]string{"Last-Modified": "Tue, 01 Dec 2026 03:00:00 GMT", "Content-Type": "text/plain"}

// requireFUSE skips (fails under AGENTBOX_REQUIRE_ALL) where the test
// cannot run: not root (the host's /dev/fuse is 0600 here), no /dev/fuse,
// no s3fs.
func requireFUSE(t *testing.T) {
	t.Helper()
	testenv.Need(t, local.FUSEAvailable(), "sandboxes cannot have FUSE here (needs /dev/fuse and root)")
	testenv.NeedTool(t, "s3fs", "s3fs")
}

// fuseMounts lists the FUSE mounts inside sb (their mount points and
// options).
func fuseMounts(t *testing.T, sb *local.Sandbox) string {
	t.Helper()
	return mustRun(t, sb, `awk '{i=7; while ($i != "-") i++; if ($(i+1) ~ /^fuse/) print $5, $6, $(i+1)}' /proc/self/mountinfo`)
}

// TestFUSEMountS3: with Confinement.AllowFUSE, s3fs mounts a bucket of an
// S3 server inside the sandbox as the sandbox's root does it (mount(2)
// done by the init's supervisor): reads and writes reach the bucket, the
// mount is nosuid,nodev, umount ends it. fusermount3 -u unmounts too.
func TestFUSEMountS3(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	sb := newSandbox(t, local.Options{Config: local.Config{Confinement: local.Confinement{AllowFUSE: true}}})
	url, be := serveS3(t, sb)
	// The sandbox's /dev/fuse node, open to every user, is in a folder no
	// other user of the host reaches.
	if fi, err := os.Stat(filepath.Dir(local.Dir(sb))); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("the folder of the sandboxes has mode %v, want 0700", fi.Mode().Perm())
	}

	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Metadata["syscallFilter"]; !strings.Contains(got, "FUSE mounts allowed") {
		t.Errorf("Info syscallFilter = %q, want it to say FUSE mounts are allowed", got)
	}
	if !strings.Contains(sb.Instructions(), "FUSE file systems") {
		t.Errorf("Instructions do not mention FUSE: %s", sb.Instructions())
	}

	mustRun(t, sb, "printf 'AKID:SECRET' > /tmp/pw && chmod 600 /tmp/pw && mkdir -p /tmp/m")
	mountCmd := "s3fs bkt /tmp/m -o url=" + url + ",use_path_request_style,passwd_file=/tmp/pw,dbglevel=warn"
	for _, unmount := range []string{"umount /tmp/m", "fusermount3 -u /tmp/m"} {
		mustRun(t, sb, mountCmd)
		mounts := fuseMounts(t, sb)
		if !strings.Contains(mounts, "/tmp/m ") || !strings.Contains(mounts, "fuse.s3fs") {
			t.Fatalf("no s3fs mount at /tmp/m after s3fs; FUSE mounts:\n%s", mounts)
		}
		for _, o := range []string{"nosuid", "nodev"} {
			if !strings.Contains(mounts, o) {
				t.Errorf("the s3fs mount lacks %s: %s", o, mounts)
			}
		}
		if got := mustRun(t, sb, "cat /tmp/m/hello.txt"); got != "hello from the bucket\n" {
			t.Errorf("hello.txt through s3fs = %q", got)
		}
		mustRun(t, sb, "echo written in the sandbox > /tmp/m/new.txt && sync /tmp/m/new.txt")
		obj, err := be.GetObject("bkt", "new.txt", nil)
		if err != nil {
			t.Fatalf("new.txt is not in the bucket: %v", err)
		}
		b, _ := io.ReadAll(obj.Contents)
		obj.Contents.Close()
		if string(b) != "written in the sandbox\n" {
			t.Errorf("new.txt in the bucket = %q", b)
		}
		if _, err := be.DeleteObject("bkt", "new.txt"); err != nil {
			t.Fatal(err)
		}
		mustRun(t, sb, unmount)
		if mounts := fuseMounts(t, sb); mounts != "" {
			t.Fatalf("after %s, FUSE mounts remain:\n%s", unmount, mounts)
		}
		// The FUSE server ends with its mount.
		if !poll(maxWait, func() bool { return !strings.Contains(run(t, sb, "pgrep -x s3fs || true").Stdout, "\n") }) {
			t.Fatalf("s3fs still runs after %s", unmount)
		}
	}
}

// maxWait bounds the waits of the FUSE tests for a process to end.
const maxWait = 10 * time.Second

// mountProbe is a Python program that calls mount(2) with the arguments
// of its command line (source target fstype flags data; data "-" for
// NULL) and prints OK or the errno's name; its standard input is passed
// on, so that fd=0 can name a descriptor.
const mountProbe = `import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a = sys.argv[1:]
data = None if a[4] == "-" else a[4].encode()
r = libc.mount(a[0].encode(), a[1].encode(), a[2].encode(), ctypes.c_ulong(int(a[3])), data)
print("OK" if r == 0 else errno.errorcode[ctypes.get_errno()])
`

// umountProbe calls umount2(target, 0) and prints OK or the errno's name.
const umountProbe = `import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.umount2(sys.argv[1].encode(), 0)
print("OK" if r == 0 else errno.errorcode[ctypes.get_errno()])
`

// TestFUSERefused: without AllowFUSE a sandbox has no /dev/fuse and
// mount(2) of a FUSE file system fails with EPERM; with it, every other
// mount (tmpfs, bind, proc, remount) and every unmount of a non-FUSE
// mount stays refused, and the supervisor refuses FUSE mounts whose fd=
// is not a /dev/fuse descriptor of the caller, or whose mount point is
// /proc, /sys, /dev or /run/agentbox, in one or above one (/run, /), or
// is reached through a magic link (which the supervisor would resolve as
// itself).
func TestFUSERefused(t *testing.T) {
	requireFUSE(t)
	_, err := exec.LookPath("python3")
	testenv.Need(t, err == nil, "python3 is not installed")
	runProbe := func(sb *local.Sandbox, program, stdin string, args ...string) string {
		t.Helper()
		mustRun(t, sb, "mkdir -p /tmp/p /tmp/q && cat > /tmp/probe.py << 'EOF'\n"+program+"EOF")
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = "'" + a + "'"
		}
		return strings.TrimSpace(mustRun(t, sb, "python3 /tmp/probe.py "+strings.Join(q, " ")+" < "+stdin))
	}
	const fuseOpts = "fd=0,rootmode=40000,user_id=0,group_id=0"

	t.Run("without AllowFUSE", func(t *testing.T) {
		sb := newSandbox(t, local.Options{})
		if r := run(t, sb, "test -e /dev/fuse"); r.ExitCode == 0 {
			t.Errorf("/dev/fuse exists in a sandbox without AllowFUSE")
		}
		if got := runProbe(sb, mountProbe, "/dev/null", "x", "/tmp/p", "fuse.x", "0", fuseOpts); got != "EPERM" {
			t.Errorf("FUSE mount without AllowFUSE: %s, want EPERM", got)
		}
		if r := run(t, sb, "s3fs bkt /tmp/p -o url=http://127.0.0.1:1,passwd_file=/dev/null"); r.ExitCode == 0 {
			t.Errorf("s3fs succeeded without AllowFUSE")
		}
	})

	t.Run("with AllowFUSE", func(t *testing.T) {
		sb := newSandbox(t, local.Options{Config: local.Config{Confinement: local.Confinement{AllowFUSE: true}}})
		mustRun(t, sb, "ln -sfn /proc/self/cwd /tmp/cwdlink")
		before := mustRun(t, sb, "cat /proc/self/mountinfo | wc -l")
		for _, tc := range []struct {
			name  string
			stdin string
			args  []string
			want  string
		}{
			{"tmpfs", "/dev/null", []string{"none", "/tmp/p", "tmpfs", "0", "-"}, "EPERM"},
			{"bind", "/dev/null", []string{"/tmp/q", "/tmp/p", "", strconv.Itoa(unix.MS_BIND), "-"}, "EPERM"},
			{"proc", "/dev/null", []string{"proc", "/tmp/p", "proc", "0", "-"}, "EPERM"},
			{"remount /", "/dev/null", []string{"", "/", "", strconv.Itoa(unix.MS_REMOUNT | unix.MS_BIND), "-"}, "EPERM"},
			{"fuse with a bind flag", "/dev/fuse", []string{"x", "/tmp/p", "fuse.x", strconv.Itoa(unix.MS_BIND), fuseOpts}, "EPERM"},
			{"fuseblk", "/dev/fuse", []string{"/dev/null", "/tmp/p", "fuseblk", "0", fuseOpts}, "EPERM"},
			{"fuse, fd not /dev/fuse", "/dev/null", []string{"x", "/tmp/p", "fuse.x", "0", fuseOpts}, "EINVAL"},
			{"fuse, no fd", "/dev/fuse", []string{"x", "/tmp/p", "fuse.x", "0", "rootmode=40000,user_id=0,group_id=0"}, "EINVAL"},
			{"fuse on /proc", "/dev/fuse", []string{"x", "/proc/sys", "fuse.x", "0", fuseOpts}, "EPERM"},
			{"fuse on /dev", "/dev/fuse", []string{"x", "/dev/shm", "fuse.x", "0", fuseOpts}, "EPERM"},
			{"fuse on /run/agentbox", "/dev/fuse", []string{"x", "/run/agentbox", "fuse.x", "0", fuseOpts}, "EPERM"},
			{"fuse on /", "/dev/fuse", []string{"x", "/", "fuse.x", "0", fuseOpts}, "EPERM"},
			{"fuse on /tmp/p/../..", "/dev/fuse", []string{"x", "/tmp/p/../..", "fuse.x", "0", fuseOpts}, "EPERM"},
			// An ancestor of a forbidden folder hides it as well.
			{"fuse on /run", "/dev/fuse", []string{"x", "/run", "fuse.x", "0", fuseOpts}, "EPERM"},
			{"fuse on /tmp/../run", "/dev/fuse", []string{"x", "/tmp/../run", "fuse.x", "0", fuseOpts}, "EPERM"},
			// Magic links would be the supervisor's (the init's) own.
			{"fuse on /proc/self/cwd", "/dev/fuse", []string{"x", "/proc/self/cwd", "fuse.x", "0", fuseOpts}, "ELOOP"},
			{"fuse on /proc/1/root/tmp/p", "/dev/fuse", []string{"x", "/proc/1/root/tmp/p", "fuse.x", "0", fuseOpts}, "ELOOP"},
			{"fuse on a link to /proc/self/cwd", "/dev/fuse", []string{"x", "/tmp/cwdlink", "fuse.x", "0", fuseOpts}, "ELOOP"},
		} {
			if got := runProbe(sb, mountProbe, tc.stdin, tc.args...); got != tc.want {
				t.Errorf("mount %s: %s, want %s", tc.name, got, tc.want)
			}
		}
		for _, target := range []string{"/proc", "/dev/shm", "/tmp", "/"} {
			if got := runProbe(sb, umountProbe, "/dev/null", target); got != "EPERM" {
				t.Errorf("umount %s: %s, want EPERM", target, got)
			}
		}
		if after := mustRun(t, sb, "cat /proc/self/mountinfo | wc -l"); after != before {
			t.Errorf("mounts changed: %s lines before, %s after", before, after)
		}
	})
}

// threadMountProbe mounts a FUSE file system (on /dev/fuse, which it
// opens) at /tmp/t from a thread other than the process's main one, as
// Go FUSE servers such as gcsfuse may, and prints the outcome and whether
// the mount shows. It serves no FUSE request: its exit ends the
// connection, and anything that touched the mount meanwhile would wait.
const threadMountProbe = `import ctypes, errno, os, threading
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/t", exist_ok=True)
fd = os.open("/dev/fuse", os.O_RDWR)
out = []
def mount():
    opts = "fd=%d,rootmode=40000,user_id=0,group_id=0" % fd
    r = libc.mount(b"agentbox-thread", b"/tmp/t", b"fuse.agentbox", ctypes.c_ulong(0), opts.encode())
    out.append("OK" if r == 0 else errno.errorcode[ctypes.get_errno()])
t = threading.Thread(target=mount)
t.start()
t.join()
out.append("mounted" if " /tmp/t " in open("/proc/self/mountinfo").read() else "absent")
print(" ".join(out))
`

// TestFUSEMountFromThread: the supervisor answers a FUSE mount called
// from a thread that is not its process's main one (seccomp names the
// thread; the supervisor reaches the caller's descriptors through its
// process), as a Go FUSE server's mount may be; and the mount, its server
// gone (statfs on it fails with ENOTCONN), still comes off with umount.
func TestFUSEMountFromThread(t *testing.T) {
	requireFUSE(t)
	_, err := exec.LookPath("python3")
	testenv.Need(t, err == nil, "python3 is not installed")
	sb := newSandbox(t, local.Options{Config: local.Config{Confinement: local.Confinement{AllowFUSE: true}}})
	mustRun(t, sb, "cat > /tmp/probe.py << 'EOF'\n"+threadMountProbe+"EOF")
	for i := range 5 {
		if got := strings.TrimSpace(mustRun(t, sb, "python3 /tmp/probe.py; umount -l /tmp/t")); got != "OK mounted" {
			t.Fatalf("try %d: mount from a thread: %q, want \"OK mounted\"", i, got)
		}
	}
}
