//go:build linux

package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Tests of a fork's ID-mapped disk image (diskids_linux.go): the copy
// keeps the source's owners on disk, and the fork sees its own.

// hostOwner returns "uid:gid" of the file p, as the host sees it.
func hostOwner(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(int(st.Uid)) + ":" + strconv.Itoa(int(st.Gid))
}

// ids returns "first+k:first+k", the host owner of uid and gid k of a
// sandbox whose range starts at first.
func ids(first, k int) string {
	return strconv.Itoa(first+k) + ":" + strconv.Itoa(first+k)
}

// inInit returns the path on the host of the file p of the running
// sandbox sb (through its init's root).
func inInit(t *testing.T, sb *local.Sandbox, p string) string {
	t.Helper()
	pid := local.InitPID(sb)
	if pid == 0 {
		t.Fatalf("sandbox %s does not run", sb.ID())
	}
	return "/proc/" + strconv.Itoa(pid) + "/root" + p
}

// TestForkDiskIDMapped: the metadata of a fork records that its disk
// image stores the source's host ids (DiskIDs ≠ HostIDs), and no walk
// changed them: the copy, mounted as stored, has the source's owners,
// while the fork sees the files as its own (inside, 1000:1000; on the
// host, through its init, its own range).
func TestForkDiskIDMapped(t *testing.T) {
	needRoot(t) // disk images too
	ctx := context.Background()
	sb := newSandbox(t, local.Options{StateDir: newStateDir(t)})
	mustRun(t, sb, "echo x > ~/owned && chown 1000:1000 ~/owned")
	must(t, sb.Stop(ctx))
	f := fork(t, sb, sandbox.ForkOptions{})
	src, _ := local.HostIDsOf(sb)
	host, diskIDs := local.HostIDsOf(f)
	if diskIDs != src || host == src || host == 0 {
		t.Fatalf("the fork's metadata: host ids from %d, disk ids from %d; want its own range and the source's (%d)", host, diskIDs, src)
	}
	home := strings.TrimSpace(mustRun(t, sb, "echo ~"))
	must(t, sb.Stop(ctx))
	must(t, local.InDiskAsStored(f, func(root string) error {
		if got := hostOwner(t, filepath.Join(root, "home", "owned")); got != ids(src, 1000) {
			t.Errorf("the fork's image as stored: ~/owned owned by %s, want the source's %s (no owner walk)", got, ids(src, 1000))
		}
		return nil
	}))
	if got := mustRun(t, f, "stat -c %u:%g ~/owned"); got != "1000:1000\n" {
		t.Errorf("inside the fork: ~/owned owned by %q, want 1000:1000", got)
	}
	if got := hostOwner(t, inInit(t, f, home+"/owned")); got != ids(host, 1000) {
		t.Errorf("on the host, through the fork's init: ~/owned owned by %s, want the fork's %s", got, ids(host, 1000))
	}
}

// TestForkOfForkOwners: a fork of a fork (running) sees the first
// source's files with their owners and set-user-ID bit, can overwrite
// them, and its image stores the first source's ids.
func TestForkOfForkOwners(t *testing.T) {
	needRoot(t) // disk images too
	sb := newSandbox(t, local.Options{StateDir: newStateDir(t)})
	mustRun(t, sb, "echo a > /tmp/h && chown 1000:1000 /tmp/h && echo b > /usr/local/s && chmod 4755 /usr/local/s")
	f1 := fork(t, sb, sandbox.ForkOptions{})
	f2 := fork(t, f1, sandbox.ForkOptions{})
	src, _ := local.HostIDsOf(sb)
	if host, diskIDs := local.HostIDsOf(f2); diskIDs != src || host == src {
		t.Errorf("the fork of a fork: host ids from %d, disk ids from %d; want its own and the first source's (%d)", host, diskIDs, src)
	}
	want := "1000:1000 -rwsr-xr-x\n"
	if got := mustRun(t, f2, "stat -c %u:%g /tmp/h | tr '\\n' ' '; stat -c %A /usr/local/s"); got != want {
		t.Errorf("the fork of a fork: %q, want %q", got, want)
	}
	if got := mustRun(t, f2, "setpriv --reuid 1000 --regid 1000 --clear-groups sh -c 'echo again > /tmp/h' && echo root > /usr/local/s && cat /tmp/h /usr/local/s"); got != "again\nroot\n" {
		t.Errorf("overwriting the first source's files in the fork of a fork, as uid 1000 and as root: %q, want again and root", got)
	}
}

// TestForkRestartIDMapped: after a stop and a start, the fork's mounts of
// its image are ID-mapped again, and files it wrote before and after the
// restart, as root and as uid 1000, are its own on both sides: inside
// 0:0 and 1000:1000, on the host its range.
func TestForkRestartIDMapped(t *testing.T) {
	needRoot(t) // disk images too
	ctx := context.Background()
	sb := newSandbox(t, local.Options{StateDir: newStateDir(t)})
	f := fork(t, sb, sandbox.ForkOptions{})
	home := strings.TrimSpace(mustRun(t, f, "echo ~"))
	mustRun(t, f, "echo r > ~/before-root && echo u > ~/before-user && chown 1000:1000 ~/before-user")
	must(t, f.Stop(ctx))
	if _, err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	mustRun(t, f, "echo r > ~/after-root && echo u > ~/after-user && chown 1000:1000 ~/after-user")
	mi, err := os.ReadFile(inInit(t, f, "/proc/1/mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	if !mountIDMapped(string(mi), home) {
		t.Errorf("after a restart the fork's home %s is not an ID-mapped mount:\n%s", home, mi)
	}
	host, _ := local.HostIDsOf(f)
	for name, k := range map[string]int{"before-root": 0, "before-user": 1000, "after-root": 0, "after-user": 1000} {
		if got := mustRun(t, f, "stat -c %u:%g ~/"+name); got != strconv.Itoa(k)+":"+strconv.Itoa(k)+"\n" {
			t.Errorf("inside the restarted fork: ~/%s owned by %q, want %d:%d", name, got, k, k)
		}
		if got := hostOwner(t, inInit(t, f, home+"/"+name)); got != ids(host, k) {
			t.Errorf("on the host: ~/%s owned by %s, want the fork's %s", name, got, ids(host, k))
		}
	}
}

// mountIDMapped reports whether the mount at target in mountinfo is
// ID-mapped.
func mountIDMapped(mountinfo, target string) bool {
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == target && strings.Contains(f[5], "idmapped") {
			return true
		}
	}
	return false
}

// TestSnapshotOfFork: a snapshot of a fork's root has its files with the
// owners they have inside (0-based in the layer): a sandbox made of it
// sees 1000:1000 and the set-user-ID bit.
func TestSnapshotOfFork(t *testing.T) {
	needRoot(t) // disk images too
	ctx := context.Background()
	state := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: state})
	mustRun(t, sb, "echo t > /usr/local/bin/forktool && chown 1000:1000 /usr/local/bin/forktool && chmod 4755 /usr/local/bin/forktool")
	f := fork(t, sb, sandbox.ForkOptions{})
	mustRun(t, f, "echo n > /usr/local/bin/forknew && chown 1000:1000 /usr/local/bin/forknew")
	if _, err := f.CreateSnapshot(ctx, "forksnap"); err != nil {
		t.Fatal(err)
	}
	b := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Snapshot: "forksnap"}})
	want := "1000:1000 -rwsr-xr-x\n1000:1000\n"
	if got := mustRun(t, b, "stat -c '%u:%g %A' /usr/local/bin/forktool; stat -c %u:%g /usr/local/bin/forknew"); got != want {
		t.Errorf("a sandbox of the fork's snapshot: %q, want %q", got, want)
	}
}
