package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// StartUnprivileged starts cmd, which the caller (root) made run as an
// ordinary uid, in the network namespace netns (nil: the caller's).
//
// A sandbox started without root has a user-mode network that needs a
// /dev/net/tun the user may open, mode 0666 as most systems make it.
// Where the host's is not (a container's 0600 node), cmd gets a mount
// namespace of its own in which a node of the same device, mode 0666,
// made in a temporary folder of t, covers /dev/net/tun: nothing of the
// host changes. Without any /dev/net/tun, t is skipped (failed under
// AGENTBOX_REQUIRE_ALL=1).
func StartUnprivileged(t testing.TB, netns *os.File, cmd *exec.Cmd) error {
	t.Helper()
	var st unix.Stat_t
	err := unix.Stat("/dev/net/tun", &st)
	Need(t, err == nil, fmt.Sprintf("needs /dev/net/tun (the user-mode network of a sandbox without root): %v", err))
	if st.Mode&0o006 == 0o006 && netns == nil {
		return cmd.Start()
	}
	node := ""
	if st.Mode&0o006 != 0o006 {
		node = filepath.Join(t.TempDir(), "tun")
		if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(st.Rdev)); err != nil {
			return fmt.Errorf("make a node of /dev/net/tun's device: %w", err)
		}
		if err := os.Chmod(node, 0o666); err != nil {
			return fmt.Errorf("make the node of /dev/net/tun's device mode 0666: %w", err)
		}
	}
	return startCovering(node, netns, cmd)
}

// StartWithoutTUN starts cmd, which the caller (root) made run as an
// ordinary uid, in a mount namespace of its own in which /dev/net/tun is
// a file only root may open: a host without a TUN device the user may
// use, as in some containers, whatever this host's is.
func StartWithoutTUN(t testing.TB, cmd *exec.Cmd) error {
	t.Helper()
	node := filepath.Join(t.TempDir(), "no-tun")
	if err := os.WriteFile(node, nil, 0o600); err != nil {
		return err
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return cmd.Start() // no TUN device at all: the host is already so
	}
	return startCovering(node, nil, cmd)
}

// startCovering starts cmd with node (if not "") bind-mounted over
// /dev/net/tun in a mount namespace of its own, and in the network
// namespace netns (if not nil).
func startCovering(node string, netns *os.File, cmd *exec.Cmd) error {
	return onThreadOfItsOwn(func() error {
		if node != "" {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("unshare the mount namespace: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("make the mounts private: %w", err)
			}
			if err := unix.Mount(node, "/dev/net/tun", "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("cover /dev/net/tun: %w", err)
			}
		}
		if netns != nil {
			if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("enter the network namespace: %w", err)
			}
		}
		return cmd.Start() // forks from this thread: the child has its namespaces
	})
}

// onThreadOfItsOwn runs f, which may change its thread's namespaces, on
// a thread that ends with it. Never on the process's main thread: a
// goroutine that ends locked to it leaves it parked, not ended, and
// /proc/self shows the main thread's namespaces, which would then stay
// f's for the rest of the process. While a goroutine holds the main
// thread, no other goroutine runs on it.
func onThreadOfItsOwn(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			errc <- onThreadOfItsOwn(f)
			runtime.UnlockOSThread()
			return
		}
		errc <- f() // never unlocked: the thread, and its namespaces, end with the goroutine
	}()
	return <-errc
}
