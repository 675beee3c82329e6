package local

import (
	"errors"
	"fmt"
	"slices"

	"github.com/agentbox-dev/agentbox/local/internal/landlock"
	"github.com/agentbox-dev/agentbox/local/internal/seccomp"

	"golang.org/x/sys/unix"
)

// commandThreadSteps lists the setup of the OS thread that starts every
// command of the sandbox (the toolbox server's start thread, see
// daemon.Options.StartThreadSetup), run there in order by runSteps while
// the thread still holds its capabilities.
//
// The init was cloned into a cgroup namespace rooted where it was born;
// on cgroup v1 the host moves it into its own cgroups only afterwards
// (before sending the configuration), so commands would see host cgroup
// paths. A namespace unshared on this thread, once it has joined the
// commands' cgroups below them, is rooted at the sandbox's cgroups (on
// v2 it is rooted where the first one already was).
//
// Then the thread is confined as cfg.Confinement says: Landlock scoping
// first, then the system call filter, which would refuse nothing that
// follows on that thread (the server then drops the thread's capabilities
// and sets no_new_privs). Both are per thread and inherited by every
// process forked from it, across execve, so they cover one-shot commands,
// sessions, background processes and their children. With AllowFUSE the
// filter's notification descriptor, for the FUSE supervisor, is stored
// in *notifyFD.
//
// The init's other threads stay unfiltered, by choice: they run no code of
// the user (commands reach them only through the toolbox API, whose
// commands start on the confined thread), and a later step of the init
// may need what the filter refuses (mounting into the running sandbox,
// changing its network). What protects the init from its commands is that
// it is not dumpable (makeUndumpable) and outside their Landlock domain.
func commandThreadSteps(cfg *initConfig, fds []int, notifyFD *int) []namedStep {
	c := cfg.Confinement
	return []namedStep{
		{"join the commands' cgroups", func() error { return joinCommandCgroups(cfg, fds) }},
		{"unshare a cgroup namespace", func() error { return unix.Unshare(unix.CLONE_NEWCGROUP) }},
		{"confine commands: Landlock scoping", c.scopeThread},
		{"confine commands: system call filter", func() (err error) {
			*notifyFD, err = c.filterThread()
			return err
		}},
	}
}

// scopeThread puts the calling thread in a Landlock domain of its own
// (abstract unix sockets and signals scoped), unless c.Unconfined.
func (c Confinement) scopeThread() error {
	if c.Unconfined {
		return nil
	}
	_, err := landlock.RestrictThreadScopes()
	return err
}

// filterThread loads the system call filter c asks for on the calling
// thread and returns its notification descriptor with c.AllowFUSE
// (otherwise -1). Unconfined without FUSE, there is no filter.
func (c Confinement) filterThread() (int, error) {
	if c.Unconfined && !c.AllowFUSE {
		return -1, nil
	}
	return seccomp.Load(seccomp.Profile{Unconfined: c.Unconfined, AllowNestedNamespaces: c.AllowNestedNamespaces, AllowFUSE: c.AllowFUSE})
}

// keptCapabilities returns the capabilities commands keep (as uid 0):
// CAP_SETFCAP where nested user namespaces are allowed, since the kernel
// lets a process map its namespace's root (commands run as uid 0) into a
// user namespace it creates only if it held CAP_SETFCAP. no_new_privs
// keeps the file capabilities it lets commands write from granting
// anything on execve.
func (c Confinement) keptCapabilities() []int {
	if c.nestedNamespaces() {
		return []int{unix.CAP_SETFCAP}
	}
	return nil
}

// keptCapabilities returns the capabilities commands of the sandbox keep:
// Docker's default set (DefaultCapabilities) with a writable root made of
// an image, else those its Confinement needs.
func (cfg *initConfig) keptCapabilities() []int {
	kept := cfg.Confinement.keptCapabilities()
	if cfg.Root == nil {
		return kept
	}
	for _, c := range dockerCapabilities {
		if !slices.Contains(kept, c.value) {
			kept = append(kept, c.value)
		}
	}
	return kept
}

// makeUndumpable clears the init's dumpable flag. Commands run as the same
// uid (0 of the sandbox's user namespace) as the init, so without it they
// could ptrace the init or read /proc/1/environ, /proc/1/mem and
// /proc/1/fd (the toolbox and control sockets): the kernel lets only a
// holder of CAP_SYS_PTRACE in the init's user namespace, which commands
// never hold, at a process that is not dumpable. It runs as the last
// step: the host has written the init's id maps by then, and the flag
// survives until the init ends (execve would reset it; the init never
// executes anything itself). The init still reads /proc of its commands,
// which execve made dumpable again.
func makeUndumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// maskedProcFiles are kernel-wide /proc files that /dev/null hides unless
// nested namespaces are allowed: the kernel keys of every process with the
// sandbox's host uid (the calling user's own processes, when not root)
// and their quotas.
var maskedProcFiles = []string{"keys", "key-users"}

// maskProc binds /dev/null over maskedProcFiles, like Docker's masked
// paths. Where nested namespaces are allowed it does nothing: the
// kernel refuses to mount a new /proc (as bwrap or unshare --mount-proc
// do in a nested namespace) over one with files hidden by mounts.
func (r *rootfs) maskProc() error {
	if r.cfg.Confinement.nestedNamespaces() {
		return nil
	}
	for _, f := range maskedProcFiles {
		t := r.at("proc/" + f)
		if err := unix.Mount(r.at("dev/null"), t, "", unix.MS_BIND, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // not in this kernel
			}
			return fmt.Errorf("mask /proc/%s: %w", f, err)
		}
	}
	return nil
}
