package daytona

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// bucketInSandbox is an in-memory S3 server that sandboxes of agentbox
// serve reach at 127.0.0.1:port of their own network namespace: the test
// listens there (again after each restart, from an OnStart hook: a
// started local sandbox has a new namespace), always on the same port.
type bucketInSandbox struct {
	t    *testing.T
	be   *s3mem.Backend
	h    http.Handler
	mu   sync.Mutex
	port int
	srvs []*http.Server
}

func newBucketInSandbox(t *testing.T) *bucketInSandbox {
	be := s3mem.New()
	if err := be.CreateBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"Last-Modified": "Tue, 01 Dec 2026 03:00:00 GMT", "Content-Type": "text/plain"}
	if _, err := be.PutObject("bkt", "hello.txt", meta, strings.NewReader("hello from the bucket\n"), 22, nil); err != nil {
		t.Fatal(err)
	}
	b := &bucketInSandbox{t: t, be: be, h: gofakes3.New(be).Server()}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, s := range b.srvs {
			s.Close()
		}
	})
	return b
}

// url is the S3 endpoint as the sandbox sees it.
func (b *bucketInSandbox) url() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "http://127.0.0.1:" + strconv.Itoa(b.port)
}

// onStart is an OnStart hook: it serves the bucket in the started
// sandbox's network namespace, found through a file the hook makes in its
// /tmp.
func (b *bucketInSandbox) onStart(sb func() *Sandbox) func(context.Context, string, sandbox.Outcome) error {
	return func(ctx context.Context, _ string, _ sandbox.Outcome) error {
		probe := ".netns-probe-" + rand.Text()
		if err := sb().Client().Upload(ctx, toolbox.UploadFile{Path: "/tmp/" + probe, Content: strings.NewReader("")}); err != nil {
			return err
		}
		pid := 0
		names, _ := filepath.Glob("/proc/[0-9]*")
		for _, n := range names {
			if _, err := os.Stat(n + "/root/tmp/" + probe); err == nil {
				pid, _ = strconv.Atoi(filepath.Base(n))
				break
			}
		}
		if pid == 0 {
			return errors.New("no process of the sandbox found")
		}
		return b.listen(pid)
	}
}

// listen serves the bucket on 127.0.0.1 in the network namespace of pid,
// on b.port (chosen by the first listen).
func (b *bucketInSandbox) listen(pid int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	done := make(chan error, 1)
	var ln net.Listener
	go func() {
		// This thread enters the namespace and ends with the goroutine.
		runtime.LockOSThread()
		fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(b.port))
		done <- err
	}()
	if err := <-done; err != nil {
		return err
	}
	b.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: b.h}
	b.srvs = append(b.srvs, srv)
	go srv.Serve(ln)
	return nil
}

// TestEngineMountS3 mounts a bucket with s3fs inside a sandbox of agentbox
// serve (which allows FUSE), as Mastra does on Daytona: reads and writes
// reach the bucket; the credentials live in a 0600 file until the
// unmount, never in errors; a repeated mount is a no-op and a changed
// configuration remounts; foreign mounts and non-empty folders are
// refused; a second handle adopts the mount from its marker; a sandbox
// stopped behind the handle's back gets its mount back when revived.
func TestEngineMountS3(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	testenv.Need(t, local.FUSEAvailable(), "sandboxes cannot have FUSE here (needs /dev/fuse and root)")
	testenv.NeedTool(t, "s3fs", "s3fs")
	ctx := context.Background()
	s := newServe(t, &server.Knobs{})
	bucket := newBucketInSandbox(t)
	var sb *Sandbox
	sb = newEngine(t, s, Config{}, Options{ID: "mounts", Hooks: sandbox.Hooks{OnStart: bucket.onStart(func() *Sandbox { return sb })}})
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-Value-0123456789"
	fs := mount.S3Filesystem{Bucket: "bkt", Region: "us-east-1", AccessKeyID: "AKIDTEST", SecretAccessKey: secret, Endpoint: bucket.url()}
	const p = "/home/daytona/bucket"
	if err := sb.Mount(ctx, fs, p); err != nil {
		t.Fatalf("mount: %v", err)
	}
	sh := func(cmd string) string {
		t.Helper()
		res, err := sb.ExecuteCommand(ctx, cmd, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res.Stdout
	}
	if got := sh("cat " + p + "/hello.txt"); got != "hello from the bucket\n" {
		t.Fatalf("hello.txt through the mount: %q", got)
	}
	sh("echo from the sandbox > " + p + "/new.txt && sync " + p + "/new.txt")
	if obj, err := bucket.be.GetObject("bkt", "new.txt", nil); err != nil {
		t.Errorf("new.txt not in the bucket: %v", err)
	} else {
		b, _ := io.ReadAll(obj.Contents)
		obj.Contents.Close()
		if string(b) != "from the sandbox\n" {
			t.Errorf("new.txt = %q", b)
		}
	}
	mounts, _ := sb.Mounts(ctx)
	if len(mounts) != 1 || mounts[0].Path != p || mounts[0].State != sandbox.MountMounted || mounts[0].Kind != "s3" || strings.Contains(mounts[0].Filesystem, secret) {
		t.Errorf("Mounts: %+v", mounts)
	}
	// The secret is in one file of mode 0600, nowhere else in /tmp or the
	// home.
	if got := sh("grep -rlsF " + secret + " /tmp /home | xargs -r stat -c '%a %n'"); !strings.HasPrefix(got, "600 /tmp/.agentbox-mount-") || strings.Count(got, "\n") != 1 {
		t.Errorf("files holding the secret: %q", got)
	}

	// Again with the same configuration: kept (the same s3fs).
	pid := sh("pgrep -x s3fs")
	if err := sb.Mount(ctx, fs, p); err != nil {
		t.Fatal(err)
	}
	if again := sh("pgrep -x s3fs"); again != pid {
		t.Errorf("a repeated mount remounted: s3fs %q, was %q", again, pid)
	}
	// Another key: remounted.
	fs2 := fs
	fs2.SecretAccessKey = secret + "-rotated"
	if err := sb.Mount(ctx, fs2, p); err != nil {
		t.Fatal(err)
	}
	if again := sh("pgrep -x s3fs"); again == pid || again == "" {
		t.Errorf("a changed configuration did not remount: s3fs %q, was %q", again, pid)
	}
	if got := sh("cat " + p + "/hello.txt"); got != "hello from the bucket\n" {
		t.Errorf("after the remount: %q", got)
	}

	// Refused: a non-empty folder, a mount nobody recorded.
	sh("mkdir -p /home/daytona/full && echo x > /home/daytona/full/f")
	if err := sb.Mount(ctx, fs, "/home/daytona/full"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("mount on a non-empty folder: %v", err)
	}
	sh("mkdir -p /home/daytona/foreign && printf 'AKIDTEST:x' > /tmp/pw && chmod 600 /tmp/pw && s3fs bkt /home/daytona/foreign -o url=" + bucket.url() + ",use_path_request_style,passwd_file=/tmp/pw")
	if err := sb.Mount(ctx, fs, "/home/daytona/foreign"); err == nil || !strings.Contains(err.Error(), "unmanaged") {
		t.Errorf("mount over a foreign mount: %v", err)
	}
	sh("umount /home/daytona/foreign")
	for _, m := range mustMounts(t, sb) {
		if m.Path != p && m.State != sandbox.MountError {
			t.Errorf("refused mount %s in state %s", m.Path, m.State)
		}
		if strings.Contains(m.Error, secret) {
			t.Errorf("a mount error holds the secret: %s", m.Error)
		}
	}

	// Unmount forgets refused mounts (and leaves the user's files).
	for _, q := range []string{"/home/daytona/full", "/home/daytona/foreign"} {
		if err := sb.Unmount(ctx, q); err != nil {
			t.Errorf("unmount the refused %s: %v", q, err)
		}
	}
	if got := sh("cat /home/daytona/full/f"); got != "x\n" {
		t.Errorf("the non-empty folder's file: %q", got)
	}

	// A second handle adopts the mount from its marker.
	other, err := New(Options{ID: "mounts", Client: s.client(Config{})})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range mustMounts(t, other) {
		if m.Path == p && m.State == sandbox.MountMounted && m.Filesystem == fs.String() {
			found = true
		}
	}
	if !found {
		t.Errorf("the reconnected handle does not know the mount: %+v", mustMounts(t, other))
	}

	// Stopped behind our back: the revived sandbox has its mount again.
	if err := s.srv.InjectFault(server.Fault{Kind: server.FaultStop, Path: "/toolbox/", Times: 1}); err != nil {
		t.Fatal(err)
	}
	if got := sh("cat " + p + "/hello.txt"); got != "hello from the bucket\n" {
		t.Errorf("after a revival: %q (mounts %+v)", got, mustMounts(t, sb))
	}

	// Stopped: pending; started: mounted again.
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if m := mustMounts(t, sb); len(m) != 1 || m[0].State != sandbox.MountPending {
		t.Errorf("mounts of the stopped sandbox: %+v", m)
	}
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if m := mustMounts(t, sb); len(m) != 1 || m[0].State != sandbox.MountMounted {
		t.Errorf("mounts after the start: %+v", m)
	}
	if got := sh("cat " + p + "/hello.txt"); got != "hello from the bucket\n" {
		t.Errorf("after a stop and start: %q", got)
	}

	// Unmounted: no credential, marker or folder left; a second unmount
	// finds nothing.
	if err := sb.Unmount(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := sh("grep -rlsF " + secret + " /tmp /home; ls -d /tmp/.agentbox-mount-* " + p + " 2>/dev/null; ls /tmp/.mastra-mounts 2>/dev/null; pgrep -x s3fs"); got != "" {
		t.Errorf("left after the unmount: %q", got)
	}
	if err := sb.Unmount(ctx, p); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a second unmount: %v", err)
	}
	if m := mustMounts(t, sb); len(m) != 0 {
		t.Errorf("mounts after the unmount: %+v", m)
	}
}

func mustMounts(t *testing.T, sb *Sandbox) []sandbox.MountInfo {
	t.Helper()
	m, err := sb.Mounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}
