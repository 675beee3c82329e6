package local

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The user namespace of a sandbox. Started by root, its ids 0..65535 map
// to a range of host ids of its own (hostids.go), and the namespace
// belongs to the first of them (startInit): the kernel counts per-user
// resources (inotify instances and watches, user namespaces, pending
// signals, message queue bytes) against the owner of a namespace on the
// host, so each sandbox has its own counters, apart from root's and the
// other sandboxes'. Kernel keys are counted per host uid, so the own range
// separates their quotas and /proc/keys too. Started by another user, the
// namespace maps that user's uid alone.

// shiftedMode reports whether sandboxes get host id ranges of their own:
// this process is root and its own user namespace maps every id the
// ranges may take (not so as root of a rootless container, which then
// uses the single-uid mode).
func shiftedMode() bool {
	if os.Geteuid() != 0 {
		return false
	}
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		var in, out, n int
		if _, err := fmt.Sscan(line, &in, &out, &n); err == nil && in <= idRangeSize && in+n >= hostIDLimit {
			return true
		}
	}
	return false
}

// nextHostIDs returns the host ids the ids of a sandbox not started yet
// map to when this process starts it: this process's uid alone, or nil
// when the sandbox gets a range of its own, not known before it starts.
func nextHostIDs() *idRange {
	if shiftedMode() {
		return nil
	}
	return &idRange{First: os.Geteuid(), Count: 1}
}

// hostIDsFor returns the host ids the sandbox of the folder dir, whose
// metadata is m, maps to when this process starts it now. Started by
// root, that is the range its metadata records (a sandbox keeps its
// range; one of the shared-range era keeps that), or a new one from the
// pool of stateDir; the pool records it either way. base is
// Options.HostIDBase.
func hostIDsFor(ctx context.Context, stateDir, dir string, m *meta, base int) (*idRange, error) {
	if !shiftedMode() {
		return &idRange{First: os.Geteuid(), Count: 1}, nil
	}
	r := m.HostIDs
	if r == nil || r.Count != idRangeSize {
		r = nil
		if legacyOwned(dir) {
			r = &legacyIDs
		}
	}
	if r != nil {
		if err := reserveHostIDs(ctx, stateDir, m.ID, *r); err != nil {
			return nil, err
		}
		return r, nil
	}
	got, err := allocateHostIDs(ctx, stateDir, m.ID, base)
	if err != nil {
		return nil, err
	}
	return &got, nil
}

// legacyOwned reports whether the home of the sandbox folder dir belongs
// to the range sandboxes shared before ranges were per sandbox: it was
// made by a version that did not record the range in the metadata.
func legacyOwned(dir string) bool {
	var st unix.Stat_t
	return unix.Lstat(dir+"/"+homeDir, &st) == nil && st.Uid == legacyIDBase && st.Gid == legacyIDBase
}

// ensureOwned creates dir (and parents) with mode perm (0755 when 0) and
// gives it to uid and gid unless uid is negative. An existing dir is set
// back to perm when perm is given (0700 for a private one, 01777 for /tmp).
func ensureOwned(dir string, perm uint32, uid, gid int) error {
	want := perm
	if want == 0 {
		want = 0o755
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		st.Mode, st.Uid, st.Gid = 0o755, ^uint32(0), ^uint32(0)
		perm = want
	}
	if perm != 0 && st.Mode&0o7777 != perm {
		if err := unix.Chmod(dir, perm); err != nil {
			return &os.PathError{Op: "chmod", Path: dir, Err: err}
		}
	}
	if uid < 0 || (int(st.Uid) == uid && int(st.Gid) == gid) {
		return nil
	}
	return os.Lchown(dir, uid, gid)
}

// checkUserns explains why user namespaces are unavailable, or returns nil.
func checkUserns() error {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return fmt.Errorf("%w: user namespaces are disabled (user.max_user_namespaces = 0); enable them with `sysctl -w user.max_user_namespaces=15000`", sandbox.ErrIsolationUnavailable)
	}
	if os.Geteuid() != 0 {
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			return fmt.Errorf("%w: unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); enable them with `sysctl -w kernel.unprivileged_userns_clone=1` or run as root", sandbox.ErrIsolationUnavailable)
		}
		if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
			return fmt.Errorf("%w: AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1); run as root, or allow this binary with an AppArmor profile granting `userns`", sandbox.ErrIsolationUnavailable)
		}
	}
	return nil
}

// setIDMappings maps the ids of the sandbox's user namespace to ids: the
// whole range, with uid and gid 0 as the init's own and setgroups allowed,
// or this process's own ids alone (setgroups denied, as the kernel
// requires of an unprivileged mapping).
func setIDMappings(attr *syscall.SysProcAttr, ids *idRange) {
	if ids.Count > 1 {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: ids.First, Size: ids.Count}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: ids.First, Size: ids.Count}}
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
		// The sandbox's root may set the groups of its processes (as
		// runc lets a container's): commands of an image's USER get its
		// groups, and package managers drop to their own users. Only the
		// sandbox's own ids can be named, and its init holds no
		// supplementary group whose denials dropping one would escape.
		attr.GidMappingsEnableSetgroups = true
		return
	}
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	attr.GidMappingsEnableSetgroups = false
}

// ownedByRange reports whether the user namespace of a sandbox whose ids
// map to ids is made to belong to the range's first host uid rather than
// to root (see startInit): so when the sandbox has a range of its own.
func ownedByRange(ids *idRange) bool { return ids != nil && ids.Count > 1 }

// restoreDumpable takes ownerStart and returns a function that sets the
// process's dumpable flag back to what it is now, then releases the lock.
// Changing a thread's effective uid (becomeOwner) makes the kernel clear
// the whole process's dumpable flag.
func restoreDumpable() func() {
	ownerStart.Lock()
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return func() {
		if dumpable == 1 {
			_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
		}
		ownerStart.Unlock()
	}
}

// ownerStart serializes startInit's change of credentials. The dumpable
// flag it reads and sets back belongs to the whole process, so two starts
// at once would read each other's change and leave it cleared: the lock
// guards state of the process, as syscall.ForkLock does.
var ownerStart sync.Mutex

// becomeOwner sets the effective uid of the calling OS thread to uid and
// makes its permitted capabilities effective again (the kernel clears the
// effective set when the effective uid leaves 0).
func becomeOwner(uid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
		return fmt.Errorf("set the effective uid of the starting thread to %d: %w", uid, e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read the starting thread's capabilities: %w", err)
	}
	for i := range data {
		data[i].Effective = data[i].Permitted
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("restore the starting thread's capabilities: %w", err)
	}
	return nil
}
