package local

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Identity mapping of sandboxes started by root: uid/gid 0..65535 inside
// map to uidBase.. on the host. Every sandbox of a machine shares the range
// so that volumes can be shared between sandboxes; sandboxes cannot reach
// each other anyway (separate pid, mount and ipc namespaces).
const (
	uidBase = 100000
	uidSize = 65536
)

// hostIDs returns the host ids the ids of a sandbox started now map to:
// the shifted range, or this process's own uid alone.
func hostIDs(shifted bool) *idRange {
	if shifted {
		return &idRange{First: uidBase, Count: uidSize}
	}
	return &idRange{First: os.Geteuid(), Count: 1}
}

// nextHostIDs returns the host ids the ids of a sandbox this process
// starts map to.
func nextHostIDs() *idRange { return hostIDs(shiftedMode()) }

// shiftedMode reports whether sandboxes get the shifted uid range: this
// process is root and its own user namespace maps the whole range (not so
// as root of a rootless container, which then uses the single-uid mode).
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
		if _, err := fmt.Sscan(line, &in, &out, &n); err == nil && in <= uidBase && in+n >= uidBase+uidSize {
			return true
		}
	}
	return false
}

// ensureOwned creates dir (and parents) and, when shifted, gives it to the
// sandbox root. A private dir is made, or set back to, mode 0700.
func ensureOwned(dir string, private, shifted bool) error {
	perm := uint32(0o755)
	if private {
		perm = 0o700
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err == nil {
		if private && st.Mode&0o7777 != perm {
			if err := os.Chmod(dir, os.FileMode(perm)); err != nil {
				return err
			}
		}
		if !shifted || (st.Uid == uidBase && st.Gid == uidBase) {
			return nil
		}
	} else if err := os.MkdirAll(dir, os.FileMode(perm)); err != nil {
		return err
	}
	if shifted {
		return os.Lchown(dir, uidBase, uidBase)
	}
	return nil
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

// setIDMappings maps uid and gid 0 of the sandbox's user namespace: to the
// shifted range when shifted, else to this process's own ids alone.
func setIDMappings(attr *syscall.SysProcAttr, shifted bool) {
	if shifted {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uidBase, Size: uidSize}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uidBase, Size: uidSize}}
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
		return
	}
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	attr.GidMappingsEnableSetgroups = false
}
