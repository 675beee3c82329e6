package landlock

import (
	"fmt"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// commandScopes are the Landlock IPC scopes of commands: no connecting to
// abstract unix sockets, and no signals, outside their Landlock domain.
// (Abstract sockets are per network namespace, so without scoping a
// sandbox in the host's network namespace would reach the host's.)
const commandScopes = golandlock.ScopedSet(llsys.ScopeAbstractUnixSocket | llsys.ScopeSignal)

// ABI returns the Landlock ABI version of the running kernel, 0 when it
// has no Landlock (or it is disabled).
func ABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// RestrictThreadScopes puts the calling OS thread, and every process it
// forks from now on, in a new Landlock domain with commandScopes, where
// the kernel supports them (ScopeABI and later; best effort below, where it
// does nothing). It reports whether it restricted anything. The thread
// must hold CAP_SYS_ADMIN in its user namespace or have no_new_privs set.
//
// go-landlock's Restrict functions would restrict every thread of the
// process (the init's server included); only its ruleset creation is used
// here, and the ruleset is enforced on this thread alone.
func RestrictThreadScopes() (bool, error) {
	fd, flags, err := golandlock.Config{Scoped: commandScopes}.BestEffort().NewRulesetFD()
	if err != nil {
		return false, fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		return false, nil // nothing the kernel can scope
	}
	defer unix.Close(fd)
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return false, fmt.Errorf("landlock: restricting the command thread: %w", err)
	}
	return true, nil
}
