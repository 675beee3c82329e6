package local

import (
	"fmt"
	"strings"

	"github.com/agentbox-dev/agentbox/local/internal/landlock"
)

// landlockScopeABI is the first Landlock ABI with IPC scoping, which is
// what commands get from Landlock.
const landlockScopeABI = landlock.ScopeABI

// landlockABI returns the running kernel's Landlock ABI (0: none).
func landlockABI() int { return landlock.ABI() }

// Metadata keys of Info that say what confines the sandbox's commands.
const (
	infoSyscallFilter = "syscallFilter"
	infoLandlock      = "landlock"
)

// nestedNamespaces reports whether commands may create nested user
// namespaces (and hold the CAP_SETFCAP that needs).
func (c Confinement) nestedNamespaces() bool { return c.AllowNestedNamespaces || c.Unconfined }

// syscallFilterStatus says which system call filter commands run under.
func (c Confinement) syscallFilterStatus() string {
	s := "default"
	switch {
	case c.Unconfined:
		s = "off (Confinement.Unconfined)"
	case c.AllowNestedNamespaces:
		s = "default, nested namespaces allowed"
	}
	if c.AllowFUSE {
		s += ", FUSE mounts allowed"
	}
	return s
}

// landlockStatus says what Landlock does for commands on a kernel with
// Landlock ABI abi (0: none).
func (c Confinement) landlockStatus(abi int) string {
	switch {
	case c.Unconfined:
		return "off (Confinement.Unconfined)"
	case abi >= landlockScopeABI:
		return fmt.Sprintf("ABI %d: abstract unix sockets and signals scoped to the sandbox", abi)
	case abi > 0:
		return fmt.Sprintf("ABI %d: not used (scoping needs ABI %d)", abi, landlockScopeABI)
	}
	return "not available in this kernel"
}

// addInfo records in md (Info.Metadata) what confines the commands.
func (c Confinement) addInfo(md map[string]string, abi int) {
	md[infoSyscallFilter] = c.syscallFilterStatus()
	md[infoLandlock] = c.landlockStatus(abi)
}

// instructions tells an agent what its commands may not do.
func (c Confinement) instructions(abi int) string {
	fuse := ""
	if c.AllowFUSE {
		fuse = " FUSE file systems (s3fs, gcsfuse, sshfs …) may be mounted (/dev/fuse is present; other mounts are refused)."
	}
	if c.Unconfined {
		return "Commands run without a system call filter or Landlock, and may create nested user namespaces (they hold CAP_SETFCAP for that)." + fuse
	}
	var b strings.Builder
	b.WriteString("A system call filter refuses (EPERM) kernel keyrings, bpf, perf events, io_uring, kernel modules, setting the clock")
	if c.AllowNestedNamespaces {
		b.WriteString("; nested user namespaces, mounting inside them and setns are allowed (for tools such as bwrap), and commands hold CAP_SETFCAP for that")
	} else {
		b.WriteString(", mounting and new namespaces")
	}
	b.WriteString("; 32-bit programs do not run.")
	b.WriteString(fuse)
	if abi >= landlockScopeABI {
		b.WriteString(" Commands cannot signal or reach abstract unix sockets of processes outside the sandbox (Landlock).")
	}
	return b.String()
}
