//go:build linux

package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Probes of one identity per sandbox: each sandbox started by root has a
// host id range of its own, which its files, kernel keys and per-user
// counters follow, while volumes stay shared. Each asserts containment
// and, as proof that it ran, what the probe reached where it may.

// identityProbes are escape probes (escape_probe_test.go) of per-user
// kernel resources.
var identityProbes = map[string]func(args []string) error{
	// fill_user_keys PREFIX adds keys to the user keyring until the kernel
	// refuses one, prints "keys N", and returns the refusal.
	"fill_user_keys": func(args []string) error {
		for n := 0; ; n++ {
			if _, err := unix.AddKey("user", fmt.Sprintf("%s%d", args[0], n), []byte("x"), unix.KEY_SPEC_USER_KEYRING); err != nil {
				fmt.Println("keys", n)
				return err
			}
		}
	},
	// hold_inotify makes inotify instances until the kernel refuses one,
	// prints "inotify N OUTCOME", and holds them until killed.
	"hold_inotify": func([]string) error {
		n := 0
		var err error
		for ; err == nil; n++ {
			_, err = unix.InotifyInit1(unix.IN_CLOEXEC)
		}
		fmt.Println("inotify", n-1, probeOutcome(err))
		time.Sleep(time.Hour)
		return nil
	},
	"inotify_init": func([]string) error { return closeFD(unix.InotifyInit1(unix.IN_CLOEXEC)) },
	// hold_nproc N lowers RLIMIT_NPROC to N, starts `sleep` processes
	// until the kernel refuses one, prints "forks N OUTCOME", and holds
	// them until killed.
	"hold_nproc": func(args []string) error {
		limit, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		// The Go runtime cannot start a thread past the limit: start the
		// few it may need while waiting now, and keep them.
		warmThreads(8)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: uint64(limit), Max: uint64(limit)}); err != nil {
			return err
		}
		forks := 0
		for ; forks < 10*limit; forks++ {
			if _, err = syscall.ForkExec("/bin/sleep", []string{"sleep", "3600"}, &syscall.ProcAttr{}); err != nil {
				break
			}
		}
		fmt.Println("forks", forks, probeOutcome(err))
		time.Sleep(time.Hour)
		return nil
	},
}

func init() {
	for name, p := range identityProbes {
		escapeProbes[name] = p
	}
}

// warmThreads makes the runtime start n threads, which it keeps idle.
func warmThreads(n int) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread of its own each
			<-release
			runtime.UnlockOSThread()
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
}

// needRoot skips (or fails, in CI) a test of host id ranges, which only
// sandboxes started by root have.
func needRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "needs root: only sandboxes started by root get host id ranges of their own")
}

// idRange is a range of host ids.
type idRange struct{ first, count int }

func (r idRange) String() string { return fmt.Sprintf("%d-%d", r.first, r.first+r.count-1) }

func (r idRange) has(id uint32) bool { return int(id) >= r.first && int(id) < r.first+r.count }

func (r idRange) overlaps(o idRange) bool {
	return r.first < o.first+o.count && o.first < r.first+r.count
}

// hostIDs returns the host ids of the running sandbox sb as its uid and
// gid maps say, after checking that Info says the same and that the range
// is one of the pool's.
func hostIDs(t *testing.T, sb *local.Sandbox) idRange {
	t.Helper()
	out := mustRun(t, sb, "cat /proc/self/uid_map /proc/self/gid_map")
	f := strings.Fields(out)
	if len(f) != 6 || f[0] != "0" || f[3] != "0" || f[1] != f[4] || f[2] != f[5] {
		t.Fatalf("uid and gid maps inside: %q, want one line each, the same", out)
	}
	first, _ := strconv.Atoi(f[1])
	count, _ := strconv.Atoi(f[2])
	r := idRange{first, count}
	info, err := sb.Info(context.Background())
	if err != nil || info.Identity == nil || info.Identity.HostUID != first || info.Identity.HostUIDCount != count {
		t.Fatalf("Info %+v (%v) does not say the sandbox's ids are %v", info.Identity, err, r)
	}
	return r
}

// checkPoolRange fails unless r is a range of the default pool.
func checkPoolRange(t *testing.T, what string, r idRange) {
	t.Helper()
	if r.count != 65536 || r.first%65536 != 0 || r.first < local.DefaultHostIDBase || r.first+r.count > local.HostIDLimit {
		t.Errorf("%s has host ids %v: not a range of 65536 of the pool [%d, %d)", what, r, local.DefaultHostIDBase, local.HostIDLimit)
	}
}

// poolRanges returns the ranges the pool file of stateDir records.
func poolRanges(t *testing.T, stateDir string) map[string]idRange {
	t.Helper()
	var p struct {
		Ranges map[string]struct{ First, Count int } `json:"ranges"`
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "hostids.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	out := map[string]idRange{}
	for id, r := range p.Ranges {
		out[id] = idRange{r.First, r.Count}
	}
	return out
}

// owner returns the host uid and gid of path.
func owner(t *testing.T, path string) (uid, gid uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid
}

// nsOwner returns the host uid owning the user namespace of pid.
func nsOwner(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const nsGetOwnerUID = 0xb704 // _IO(0xb7, 0x4)
	var uid uint32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); e != 0 {
		t.Fatalf("NS_GET_OWNER_UID: %v", e)
	}
	return int(uid)
}

// TestIdentityRangesDisjoint: sandboxes created at the same time, two in
// this process and one in another, get disjoint ranges of the pool, which
// the pool file records; each sandbox's user namespace belongs to its
// range's first uid, and this process stays dumpable.
func TestIdentityRangesDisjoint(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	// Other code may have cleared it (a child started with other
	// credentials clears it through the memory it shares until exec).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	stateDir := newStateDir(t)
	_, out, goAhead := startHelper(t, "start", stateDir, "c", true)
	sbs := map[string]*local.Sandbox{"a": openSandbox(t, local.Options{ID: "a", StateDir: stateDir}), "b": openSandbox(t, local.Options{ID: "b", StateDir: stateDir})}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if err := goAhead(); err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sb.Start(ctx)
			errs <- err
		}()
	}
	if line := readLine(t, out); line != "outcome created" {
		t.Fatalf("helper: %q", line)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := local.New(local.Options{ID: "c", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	sbs["c"] = c
	got := map[string]idRange{}
	for id, sb := range sbs {
		r := hostIDs(t, sb)
		checkPoolRange(t, id, r)
		if o := nsOwner(t, local.InitPID(sb)); o != r.first {
			t.Errorf("the user namespace of %s belongs to host uid %d, want %d (its range's first)", id, o, r.first)
		}
		for other, o := range got {
			if r.overlaps(o) {
				t.Errorf("%s has host ids %v, %s has %v: they overlap", id, r, other, o)
			}
		}
		got[id] = r
	}
	c.Close(ctx)
	if pool := poolRanges(t, stateDir); fmt.Sprint(pool) != fmt.Sprint(got) {
		t.Errorf("the pool records %v, the sandboxes have %v", pool, got)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 1 {
		t.Errorf("this process's dumpable flag is %d (%v) after starting sandboxes, want 1", d, err)
	}
}

// TestIdentityFilesOnHost: what a sandbox writes in its home, /tmp and
// working directory belongs, on the host, to its own range (its root is
// the range's first id), and to no other sandbox's. The host looks at the
// files through /proc/<init>/root, which works whether they live on the
// sandbox's disk image or in its state folder.
func TestIdentityFilesOnHost(t *testing.T) {
	needRoot(t)
	stateDir := newStateDir(t)
	a := newSandbox(t, local.Options{ID: "a", StateDir: stateDir, Config: local.Config{WorkingDirectory: "/work"}})
	b := newSandbox(t, local.Options{ID: "b", StateDir: stateDir})
	ra, rb := hostIDs(t, a), hostIDs(t, b)
	if got := mustRun(t, a, "echo h > ~/h && echo t > /tmp/t && echo w > /work/w && mkdir ~/d && stat -c %u:%g ~/h /tmp/t /work/w ~/d"); got != "0:0\n0:0\n0:0\n0:0\n" {
		t.Errorf("owners inside: %q, want the sandbox's root", got)
	}
	homeA := strings.TrimSpace(mustRun(t, a, "echo ~"))
	homeB := strings.TrimSpace(mustRun(t, b, "echo ~ && echo h > ~/h"))
	homeB = strings.Split(homeB, "\n")[0]
	rootA := fmt.Sprintf("/proc/%d/root", local.InitPID(a))
	rootB := fmt.Sprintf("/proc/%d/root", local.InitPID(b))
	for _, p := range []string{homeA + "/h", "/tmp/t", "/work/w", homeA + "/d", homeA} {
		if uid, gid := owner(t, rootA+p); int(uid) != ra.first || int(gid) != ra.first {
			t.Errorf("a's %s is owned by %d:%d on the host, want %d:%d (a's root)", p, uid, gid, ra.first, ra.first)
		}
	}
	if uid, gid := owner(t, rootB+homeB+"/h"); int(uid) != rb.first || int(gid) != rb.first || ra.has(uid) {
		t.Errorf("b's file is owned by %d:%d on the host, want %d:%d (b's root)", uid, gid, rb.first, rb.first)
	}
}

// TestIdentitySharedVolume: a volume shared by sandboxes with different
// ranges keeps canonical owners on disk (uid 0 for what their root
// makes, not either range), and each sandbox sees every file as its own
// uid: b reads and writes a's 0600 file and folder, a reads b's, a file
// the host gives uid 1000 is uid 1000 in both, and a read-only binding
// stays read-only.
func TestIdentitySharedVolume(t *testing.T) {
	needRoot(t)
	stateDir := newStateDir(t)
	vol := []local.Volume{{Name: "shared", MountPath: "/shared"}}
	a := newSandbox(t, local.Options{ID: "a", StateDir: stateDir, Config: local.Config{Volumes: vol}})
	b := newSandbox(t, local.Options{ID: "b", StateDir: stateDir, Config: local.Config{Volumes: vol}})
	ro := newSandbox(t, local.Options{ID: "ro", StateDir: stateDir, Config: local.Config{Volumes: []local.Volume{{Name: "shared", MountPath: "/shared", ReadOnly: true}}}})
	ra, rb := hostIDs(t, a), hostIDs(t, b)
	if ra.overlaps(rb) {
		t.Fatalf("a %v and b %v share host ids", ra, rb)
	}
	mustRun(t, a, "echo from-a > /shared/a && chmod 600 /shared/a && mkdir -m 700 /shared/d")
	if got := mustRun(t, b, "cat /shared/a && echo from-b >> /shared/a && echo b > /shared/d/b && stat -c '%u:%g %a' /shared/a /shared/d /shared/d/b"); got != "from-a\n0:0 600\n0:0 700\n0:0 644\n" {
		t.Errorf("b in a's files: %q", got)
	}
	if got := mustRun(t, a, "cat /shared/a /shared/d/b"); got != "from-a\nfrom-b\nb\n" {
		t.Errorf("a reads %q", got)
	}
	host := filepath.Join(stateDir, "volumes", "shared")
	for _, p := range []string{"", "a", "d", "d/b"} {
		if uid, gid := owner(t, filepath.Join(host, p)); uid != 0 || gid != 0 {
			t.Errorf("volume file %q is owned by %d:%d on the host, want 0:0 (canonical, not a's %v or b's %v)", p, uid, gid, ra, rb)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "u1000"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(host, "u1000"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	for name, sb := range map[string]*local.Sandbox{"a": a, "b": b, "ro": ro} {
		if got := mustRun(t, sb, "stat -c %u:%g /shared/u1000 /shared/a"); got != "1000:1000\n0:0\n" {
			t.Errorf("owners in %s: %q, want the canonical ids", name, got)
		}
	}
	if got := mustRun(t, ro, "cat /shared/a; touch /shared/x 2>&1 || echo refused"); !strings.HasPrefix(got, "from-a\nfrom-b\n") || !strings.Contains(got, "Read-only file system") {
		t.Errorf("read-only binding: %q", got)
	}
}

// TestIdentityVolumeSetuidUnreachable: a set-user-ID file a sandbox
// writes into a volume is set-user-ID root on the host (canonical owner
// 0), so the volumes folder is closed to every other host user, even in a
// state dir they may traverse.
func TestIdentityVolumeSetuidUnreachable(t *testing.T) {
	needRoot(t)
	stateDir := newSharedStateDir(t, "agentbox-suid-")
	if err := os.Chmod(stateDir, 0o711); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{Volumes: []local.Volume{{Name: "v", MountPath: "/v"}}}})
	if got := mustRun(t, sb, "cp /bin/true /v/suid && chmod 4755 /v/suid && stat -c %a /v/suid"); got != "4755\n" {
		t.Fatalf("set-user-ID file inside: %q", got)
	}
	file := filepath.Join(stateDir, "volumes", "v", "suid")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if uid, _ := owner(t, file); uid != 0 || fi.Mode()&fs.ModeSetuid == 0 {
		t.Fatalf("control: on the host the file is %v owned by %d; want set-user-ID root", fi.Mode(), uid)
	}
	if fi, err := os.Stat(filepath.Join(stateDir, "volumes")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("volumes folder: %v %v, want mode 0700", fi, err)
	}
	asNobody := func(name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		return cmd.Run()
	}
	if err := asNobody("/usr/bin/stat", stateDir); err != nil {
		t.Fatalf("control: another user cannot reach the state dir itself: %v", err)
	}
	if err := asNobody(file); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("another host user running the file: %v, want permission denied", err)
	}
}

// TestIdentityKeysSeparate: with keyctl allowed (Confinement.Unconfined),
// a sandbox that fills its key quota exhausts only its own: another
// sandbox neither sees its keys in /proc/keys nor loses its quota.
func TestIdentityKeysSeparate(t *testing.T) {
	needRoot(t)
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	cfg := probeConfig(local.Confinement{Unconfined: true})
	a := newSandbox(t, local.Options{ID: "a", StateDir: stateDir, Config: cfg})
	b := newSandbox(t, local.Options{ID: "b", StateDir: stateDir, Config: cfg})
	prefix := fmt.Sprintf("agentbox-keys-a-%d-", os.Getpid())
	got := strings.Fields(runProbe(t, a, "fill_user_keys", prefix))
	if len(got) != 3 || got[0] != "keys" || got[2] != "EDQUOT" {
		t.Fatalf("a filling its key quota: %q, want keys N EDQUOT", got)
	}
	if n, _ := strconv.Atoi(got[1]); n < 50 {
		t.Errorf("a added %d keys before its quota ran out", n)
	}
	if keys := mustRun(t, a, "cat /proc/keys"); !strings.Contains(keys, prefix+"0") {
		t.Fatalf("control: a's /proc/keys does not show its own key %s0: %q", prefix, keys)
	}
	if keys := mustRun(t, b, "cat /proc/keys /proc/key-users"); strings.Contains(keys, prefix) || strings.Count(keys, "\n") > 10 {
		t.Errorf("b sees a's keys:\n%s", keys)
	}
	if got := runProbe(t, b, "add_user_key", fmt.Sprintf("agentbox-keys-b-%d", os.Getpid())); got != "ok" {
		t.Errorf("b adding a key after a filled its quota: %q, want ok", got)
	}
}

// spawnHolder spawns command in sb, which prints a line once it holds what
// it exhausts, and returns that line; the process is killed when the test
// ends.
func spawnHolder(t *testing.T, sb *local.Sandbox, command string) string {
	t.Helper()
	ctx := context.Background()
	p, err := sb.Processes().Spawn(ctx, command, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(ctx) })
	if !poll(30*time.Second, func() bool { return strings.Contains(p.Stdout(), "\n") }) {
		t.Fatalf("%s printed nothing: %q %q", command, p.Stdout(), p.Stderr())
	}
	return strings.TrimSpace(p.Stdout())
}

// TestIdentityInotifySeparate: inotify instances are counted against the
// owner of a sandbox's user namespace, its own host uid: a sandbox that
// takes every instance it may leaves other sandboxes, and root on the
// host, theirs.
func TestIdentityInotifySeparate(t *testing.T) {
	needRoot(t)
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	limit, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	testenv.Need(t, err == nil && limit > 0 && limit <= 8192, fmt.Sprintf("fs.inotify.max_user_instances is %q: too many to exhaust in a test", b))
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	a := newSandbox(t, local.Options{ID: "a", StateDir: stateDir, Config: probeConfig(local.Confinement{})})
	other := newSandbox(t, local.Options{ID: "b", StateDir: stateDir, Config: probeConfig(local.Confinement{})})
	got := strings.Fields(spawnHolder(t, a, probeCommand("hold_inotify")))
	if len(got) != 3 || got[0] != "inotify" || got[2] != "EMFILE" {
		t.Fatalf("a taking inotify instances: %q, want inotify N EMFILE", got)
	}
	if n, _ := strconv.Atoi(got[1]); n > limit || n < limit-16 {
		t.Errorf("a made %d inotify instances; the per-user limit is %d", n, limit)
	}
	if got := runProbe(t, other, "inotify_init"); got != "ok" {
		t.Errorf("b making an inotify instance while a holds all of its own: %q, want ok", got)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Errorf("root on the host making an inotify instance while a holds all of its own: %v", err)
	} else {
		unix.Close(fd)
	}
}

// TestIdentityNprocSeparate: RLIMIT_NPROC exhausted in one sandbox (its
// processes reach the limit it set) leaves another sandbox, under the
// same limit, its full count of processes.
func TestIdentityNprocSeparate(t *testing.T) {
	needRoot(t)
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	const limit = 60
	forks := map[string]int{}
	for _, id := range []string{"a", "b"} {
		sb := newSandbox(t, local.Options{ID: id, StateDir: stateDir, Config: probeConfig(local.Confinement{})})
		got := strings.Fields(spawnHolder(t, sb, probeCommand("hold_nproc", strconv.Itoa(limit))))
		if len(got) != 3 || got[0] != "forks" || got[2] != "EAGAIN" {
			t.Fatalf("%s forking up to RLIMIT_NPROC %d: %q, want forks N EAGAIN", id, limit, got)
		}
		forks[id], _ = strconv.Atoi(got[1])
	}
	// The sandboxes' own processes and threads (init, shell, probe)
	// count too: each had the same room.
	if forks["a"] < 20 || forks["b"] < forks["a"]-5 {
		t.Errorf("processes started under RLIMIT_NPROC %d: a %d, then b %d while a holds its own; want b about as many as a", limit, forks["a"], forks["b"])
	}
}

// TestIdentityRangeReused: destroying a sandbox returns its range to the
// pool and leaves no file of its range in the state dir; the next
// sandbox gets the range, and none of the destroyed one's files.
func TestIdentityRangeReused(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	stateDir := newStateDir(t)
	a := newSandbox(t, local.Options{ID: "a", StateDir: stateDir, Config: local.Config{WorkingDirectory: "/work", Volumes: []local.Volume{{Name: "v", MountPath: "/v"}}}})
	ra := hostIDs(t, a)
	mustRun(t, a, "echo secret > ~/s && mkdir -p ~/deep/er && echo t > /tmp/t && echo w > /work/w && echo v > /v/kept")
	if err := a.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := poolRanges(t, stateDir)["a"]; ok {
		t.Errorf("the pool still gives a range to the destroyed sandbox")
	}
	left := 0
	filepath.WalkDir(stateDir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if uid, gid := owner(t, p); ra.has(uid) || ra.has(gid) {
			t.Errorf("%s is still owned by %d:%d, of the destroyed sandbox's range %v", p, uid, gid, ra)
		}
		left++
		return nil
	})
	if left < 3 {
		t.Errorf("control: walked %d files; the volume's file should remain", left)
	}
	b := newSandbox(t, local.Options{ID: "b", StateDir: stateDir})
	if rb := hostIDs(t, b); rb != ra {
		t.Errorf("the next sandbox got %v, want the returned range %v", rb, ra)
	}
	if got := mustRun(t, b, "ls -A ~ /tmp"); got != "/home/agent:\n\n/tmp:\n" {
		t.Errorf("the next sandbox with the range finds: %q", got)
	}
}

// TestIdentityStoppedKeepsRange: a stopped sandbox keeps its range (its
// files stay its own): a sandbox created meanwhile gets another, and the
// restarted one its old range and files.
func TestIdentityStoppedKeepsRange(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	stateDir := newStateDir(t)
	a := newSandbox(t, local.Options{ID: "a", StateDir: stateDir})
	ra := hostIDs(t, a)
	mustRun(t, a, "echo mine > ~/f")
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b := newSandbox(t, local.Options{ID: "b", StateDir: stateDir})
	if rb := hostIDs(t, b); rb.overlaps(ra) {
		t.Errorf("b got %v while a, stopped, has %v", rb, ra)
	}
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if r := hostIDs(t, a); r != ra {
		t.Errorf("a restarted with %v, want its own %v", r, ra)
	}
	if got := mustRun(t, a, "echo more >> ~/f && cat ~/f && stat -c %u ~/f"); got != "mine\nmore\n0\n" {
		t.Errorf("a's file after the restart: %q", got)
	}
}

// writeLegacySandbox writes, in stateDir, the stopped sandbox id as a
// version that gave every sandbox host ids 100000-165535 left it: a
// home owned by 100000 with a file, and metadata recording the range or
// (older) not.
func writeLegacySandbox(t *testing.T, stateDir, id string, recorded bool) {
	t.Helper()
	dir := filepath.Join(stateDir, "sandboxes", id)
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "kept"), []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, "kept")} {
		if err := os.Lchown(p, 100000, 100000); err != nil {
			t.Fatal(err)
		}
	}
	ids := ""
	if recorded {
		ids = `, "hostIds": {"first": 100000, "count": 65536}`
	}
	meta := fmt.Sprintf(`{"id": %q, "createdAt": "2026-11-01T10:00:00Z", "status": "stopped", "options": {"user": "agent", "language": "shell", "workingDirectory": "/home/agent", "autoStopInterval": 900000000000}%s}`, id, ids)
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestIdentityLegacySandboxes: sandboxes of the shared-range era, with the
// range recorded in their metadata or not, start with that range (their
// files are owned by it), side by side; a new sandbox gets a range of
// its own.
func TestIdentityLegacySandboxes(t *testing.T) {
	needRoot(t)
	stateDir := newStateDir(t)
	legacy := idRange{100000, 65536}
	writeLegacySandbox(t, stateDir, "recorded", true)
	writeLegacySandbox(t, stateDir, "unrecorded", false)
	for _, id := range []string{"recorded", "unrecorded"} {
		sb := newSandbox(t, local.Options{ID: id, StateDir: stateDir})
		if r := hostIDs(t, sb); r != legacy {
			t.Errorf("%s started with host ids %v, want its own %v", id, r, legacy)
		}
		if got := mustRun(t, sb, "echo more >> ~/kept && cat ~/kept && stat -c %u ~/kept"); got != "kept\nmore\n0\n" {
			t.Errorf("%s's file: %q", id, got)
		}
	}
	fresh := newSandbox(t, local.Options{ID: "fresh", StateDir: stateDir})
	r := hostIDs(t, fresh)
	checkPoolRange(t, "a new sandbox beside old ones", r)
	if pool := poolRanges(t, stateDir); pool["recorded"] != legacy || pool["unrecorded"] != legacy || pool["fresh"] != r {
		t.Errorf("the pool records %v", pool)
	}
}

// TestIdentityLegacyVolume: a volume of the shared-range era (files owned
// by 100000+k) is converted to canonical owners (k) when a sandbox binds
// it, set-user-ID bits kept, and is the sandbox's own inside.
func TestIdentityLegacyVolume(t *testing.T) {
	needRoot(t)
	stateDir := newStateDir(t)
	vol := filepath.Join(stateDir, "volumes", "old")
	if err := os.MkdirAll(filepath.Join(vol, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]struct {
		id   int
		mode uint32
	}{"": {100000, 0o755}, "f": {100000, 0o600}, "sub": {101000, 0o755}, "sub/g": {101000, 0o4755}, "link": {100000, 0}, "host": {0, 0o644}}
	for p, f := range files {
		path := filepath.Join(vol, p)
		switch {
		case p == "link":
			if err := os.Symlink("f", path); err != nil {
				t.Fatal(err)
			}
		case p == "f" || p == "sub/g" || p == "host":
			if err := os.WriteFile(path, []byte(p+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Lchown(path, f.id, f.id); err != nil {
			t.Fatal(err)
		}
		if f.mode != 0 {
			if err := unix.Chmod(path, f.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A link out of the volume: what it names is no file of the volume.
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(outside, 100000, 100000); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(vol, "sub", "out")); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{Volumes: []local.Volume{{Name: "old", MountPath: "/old"}}}})
	if uid, gid := owner(t, outside); uid != 100000 || gid != 100000 {
		t.Errorf("the conversion followed a link out of the volume: %s is now %d:%d", outside, uid, gid)
	}
	if got := mustRun(t, sb, "echo more >> /old/f && cat /old/link && stat -c '%n %u:%g %a' /old /old/f /old/sub /old/sub/g /old/host"); got != "f\nmore\n/old 0:0 755\n/old/f 0:0 600\n/old/sub 1000:1000 755\n/old/sub/g 1000:1000 4755\n/old/host 0:0 644\n" {
		t.Errorf("the converted volume inside: %q", got)
	}
	for p, f := range files {
		want := uint32(max(f.id-100000, 0))
		if uid, gid := owner(t, filepath.Join(vol, p)); uid != want || gid != want {
			t.Errorf("volume file %q is owned by %d:%d on the host, want %d:%d", p, uid, gid, want, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(vol, "sub/g")); err != nil || fi.Mode()&fs.ModeSetuid == 0 {
		t.Errorf("sub/g lost its set-user-ID bit: %v %v", fi, err)
	}
}

// TestIdentityInfoBeforeStart: Info of a sandbox not started yet says its
// host ids are not known (a range is given at its first start).
func TestIdentityInfoBeforeStart(t *testing.T) {
	needRoot(t)
	sb := openSandbox(t, local.Options{})
	info, err := sb.Info(context.Background())
	if err != nil || info.Status != sandbox.StatusPending || info.Identity == nil || info.Identity.HostUID != 0 || info.Identity.HostUIDCount != 0 {
		t.Errorf("Info before the first start: %+v %v, want host ids not known", info.Identity, err)
	}
	if strings.Contains(sb.Instructions(), "On the host") {
		t.Errorf("instructions before the first start claim host ids: %s", sb.Instructions())
	}
}
