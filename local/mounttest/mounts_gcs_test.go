//go:build linux

package mounttest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// loopbackNetns makes a network namespace with only a loopback interface
// and a TCP listener in it on 127.0.0.1; both go when the test ends.
func loopbackNetns(t *testing.T) (*os.File, net.Listener) {
	t.Helper()
	type result struct {
		ns  *os.File
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread changes namespace and is never given back.
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		if r.err = unix.Unshare(unix.CLONE_NEWNET); r.err != nil {
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			r.err = err
			return
		}
		if r.ns, r.err = os.Open("/proc/thread-self/ns/net"); r.err != nil {
			return
		}
		// A socket belongs to the namespace of the thread that makes it.
		r.ln, r.err = net.Listen("tcp", "127.0.0.1:0")
	}()
	r := <-done
	if r.err != nil {
		t.Fatalf("loopback-only network namespace: %v", r.err)
	}
	t.Cleanup(func() { r.ns.Close() })
	return r.ns, r.ln
}

// A GCS bucket mounted with gcsfuse, which runs only inside a loopback-only
// network namespace (with the emulator) and with GCE_METADATA_HOST on a
// dead port: nothing leaves the machine.
func TestMountGCS(t *testing.T) {
	needFUSE(t, "gcsfuse")
	ctx := context.Background()
	ns, ln := loopbackNetns(t)
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, Scheme: "http", PublicHost: ln.Addr().String(),
		InitialObjects: []fakestorage.Object{{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "data", Name: "team/seed.txt"}, Content: []byte("seeded")}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gcs.HTTPHandler()}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fake GCS server: %v", err)
		}
		gcs.Stop()
	})
	opts := local.MountOptions{
		Netns: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd()),
		// Port 9 of the namespace's loopback: nothing listens there.
		Env: []string{"GCE_METADATA_HOST=127.0.0.1:9"},
	}
	stateDir := newStateDir(t)
	sb := newSandbox(t, local.Options{ID: "mount-gcs", StateDir: stateDir, Mount: opts})
	at := mustRun(t, sb, "printf %s $HOME") + "/gcs"
	fsys := &mount.GCSFilesystem{Bucket: "data", Prefix: "team", Endpoint: "http://" + ln.Addr().String() + "/storage/v1/"}
	if err := sb.Mount(ctx, fsys, at); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	if got := mustRun(t, sb, "cat "+at+"/seed.txt; echo from-sandbox > "+at+"/new.txt; stat -c %U "+at+"/new.txt"); got != "seeded"+mustRun(t, sb, "id -un") {
		t.Fatalf("in the sandbox: %q", got)
	}
	obj, err := gcs.GetObject("data", "team/new.txt")
	if err != nil || string(obj.Content) != "from-sandbox\n" {
		t.Fatalf("object written in the sandbox: %q, %v", obj.Content, err)
	}
	infos, err := sb.Mounts(ctx)
	if err != nil || len(infos) != 1 || infos[0].State != sandbox.MountMounted || infos[0].Kind != "gcs" {
		t.Fatalf("Mounts = %+v, %v", infos, err)
	}
	// Stop and start mount it again, in the same namespace.
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, sb, "cat "+at+"/new.txt"); got != "from-sandbox\n" {
		t.Fatalf("after stop and start: %q", got)
	}
	sandboxDir := stateDir + "/sandboxes/mount-gcs"
	if err := sb.Unmount(ctx, at); err != nil {
		t.Fatal(err)
	}
	if left := fuseTools(t, sandboxDir); len(left) != 0 {
		t.Fatalf("gcsfuse left after Unmount: %v", left)
	}
}
