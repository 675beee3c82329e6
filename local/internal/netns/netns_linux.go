// Package netns runs code in network namespaces: on throwaway OS threads
// that enter an existing namespace or make a new one.
//
// A namespace belongs to the user namespace of the process that makes
// it: one made by the host (as root) belongs to the host's, so the
// sandbox's root, root of a user namespace of its own only, holds no
// capability over it and cannot change its interfaces, addresses, routes
// or firewall.
//
// A thread that enters another network namespace (unshare or setns)
// never comes back into the runtime's pool: each such step runs on a
// goroutine that locks its thread and ends without unlocking it, so the
// runtime ends the thread with it (a "throwaway thread").
package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// OnThrowawayThread runs f on a thread of its own, which ends with it, and
// returns f's error. Never on the process's main thread: that one does
// not end with its goroutine but stays, and /proc/self/… (which is its
// view) would then show the namespace f entered.
func OnThrowawayThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Locked here, the main thread cannot take the next goroutine.
			done <- OnThrowawayThread(f)
			runtime.UnlockOSThread()
			return
		}
		// No UnlockOSThread: the thread may have changed namespaces.
		done <- f()
	}()
	return <-done
}

// Run runs f in the network namespace ns (on a throwaway thread), or
// right here when ns is nil (this process's namespace).
func Run(ns *os.File, f func() error) error {
	if ns == nil {
		return f()
	}
	return OnThrowawayThread(func() error {
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter network namespace: %w", err)
		}
		return f()
	})
}

// NewHere moves the calling thread (a throwaway one) into a new network
// namespace with its loopback up, and returns the namespace (which lives
// as long as the returned file or a process in it).
func NewHere() (*os.File, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("make the sandbox's network namespace: %w", err)
	}
	// The sandbox's interface, made later, inherits this: its IPv6
	// addresses are usable at once (no duplicate address detection on a
	// link with two ends, both ours).
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/default/accept_dad", []byte("0"), 0)
	if err := LoopbackUp(); err != nil {
		return nil, fmt.Errorf("bring up the sandbox's loopback: %w", err)
	}
	return os.Open("/proc/thread-self/ns/net")
}

// LoopbackUp sets the IFF_UP flag of lo in the calling thread's network
// namespace.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
