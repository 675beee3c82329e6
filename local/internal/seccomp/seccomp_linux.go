package seccomp

import (
	"fmt"
	"slices"
	"unsafe"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Profile says what the filter lets commands do beyond the default deny
// list (a sandbox's Confinement, as the filter needs it).
type Profile struct {
	// Unconfined: no deny list; only AllowFUSE's calls are filtered.
	Unconfined bool
	// AllowNestedNamespaces lets commands create namespaces, mount and
	// setns.
	AllowNestedNamespaces bool
	// AllowFUSE hands mount and umount2 to a supervisor reading the
	// filter's notification descriptor, which Load returns.
	AllowFUSE bool
}

// The system call filter of a sandbox's commands (see Profile): a deny
// list modelled on Docker's default seccomp profile, which allows what it
// does not name. Docker allows some of these calls to a container holding
// the matching capability; commands hold none, so they are refused
// outright. The numbers come from go-seccomp-bpf's tables for the running
// architecture (amd64 and arm64 are supported).

// deniedSyscalls are refused with EPERM, whatever their arguments.
var deniedSyscalls = []string{
	// Kernel keyrings are not namespaced: key names and quotas are shared
	// by every process of a host uid.
	"keyctl", "add_key", "request_key",
	// Large kernel attack surfaces an ordinary program does not need.
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Loading kernels and kernel modules.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	// File handles reach files by inode number, around the mount tree
	// (Docker's "shocker" breakout).
	"open_by_handle_at", "name_to_handle_at",
	// The whole machine: power, swap, process accounting, the clocks, the
	// kernel log, disk quotas, terminals.
	"reboot", "swapon", "swapoff", "acct",
	"settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
	"syslog", "quotactl", "quotactl_fd", "vhangup", "lookup_dcookie", "nfsservctl",
}

// deniedWhereDefined are refused with EPERM on the architectures that
// have them: obsolete calls and port I/O.
var deniedWhereDefined = []string{
	"iopl", "ioperm", "uselib", "ustat", "sysfs", "_sysctl", "stime",
	"create_module", "get_kernel_syms", "query_module", "vm86", "vm86old",
	"afs_syscall", "tuxcall", "security", "getpmsg", "putpmsg",
}

// namespaceSyscalls are refused with EPERM unless
// Profile.AllowNestedNamespaces: entering namespaces and mounting.
var namespaceSyscalls = []string{
	"setns", "mount", "umount2", "pivot_root", "move_mount", "open_tree", "open_tree_attr",
	"fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
}

// fuseSyscalls are the calls Profile.AllowFUSE hands to the init's
// FUSE supervisor rather than refusing them.
var fuseSyscalls = []string{"mount", "umount2"}

// newNamespaceFlags are the CLONE_NEW* flags of clone and unshare
// (CLONE_NEWTIME, 0x80, only means a namespace to unshare: in clone it is
// part of the exit signal).
const (
	newNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	unshareNamespaceFlags = newNamespaceFlags | unix.CLONE_NEWTIME
)

// harmlessPersonalities are the personality(2) arguments Docker allows:
// PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32 and the query
// 0xffffffff. Others (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC …) weaken
// exploit mitigations.
var harmlessPersonalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// afVsock is AF_VSOCK: sockets to the hypervisor of a virtual machine.
const afVsock = unix.AF_VSOCK

// actionENOSYS refuses a call as if the kernel did not have it.
const actionENOSYS = bpfseccomp.ActionErrno | bpfseccomp.Action(unix.ENOSYS)

// syscallPolicy returns the filter's policy for c on the architecture a.
// Calls of deniedWhereDefined that a lacks are left out; any other name a
// lacks is an error.
func syscallPolicy(c Profile, a *arch.Info) bpfseccomp.Policy {
	var notify []bpfseccomp.SyscallGroup
	if c.AllowFUSE {
		// mount and umount2 go to the init's FUSE supervisor
		// (package fuse), which does what it allows and refuses the rest.
		notify = append(notify, bpfseccomp.SyscallGroup{Names: fuseSyscalls, Action: bpfseccomp.ActionUserNotify})
	}
	if c.Unconfined {
		return bpfseccomp.Policy{DefaultAction: bpfseccomp.ActionAllow, Syscalls: notify}
	}
	deny := append([]string(nil), deniedSyscalls...)
	for _, n := range deniedWhereDefined {
		if _, ok := a.SyscallNames[n]; ok {
			deny = append(deny, n)
		}
	}
	var conditional []bpfseccomp.NameWithConditions
	// personality: refused unless its argument is one of the harmless
	// ones (all conditions of one entry must hold).
	var notHarmless bpfseccomp.ArgumentConditions
	for _, p := range harmlessPersonalities {
		notHarmless = append(notHarmless, bpfseccomp.Condition{Argument: 0, Operation: bpfseccomp.NotEqual, Value: p})
	}
	conditional = append(conditional,
		bpfseccomp.NameWithConditions{Name: "personality", Conditions: notHarmless},
		// socket(AF_VSOCK, …). The kernel reads the family as an int, so
		// only the low 32 bits are compared: they equal 40 when bits 3
		// and 5 are set and no other is.
		bpfseccomp.NameWithConditions{Name: "socket", Conditions: bpfseccomp.ArgumentConditions{
			{Argument: 0, Operation: bpfseccomp.BitsSet, Value: 1 << 3},
			{Argument: 0, Operation: bpfseccomp.BitsSet, Value: 1 << 5},
			{Argument: 0, Operation: bpfseccomp.BitsNotSet, Value: 0xffffffff &^ afVsock},
		}},
	)
	groups := notify
	if !c.AllowNestedNamespaces {
		for _, n := range namespaceSyscalls {
			if !c.AllowFUSE || !slices.Contains(fuseSyscalls, n) {
				deny = append(deny, n)
			}
		}
		conditional = append(conditional,
			bpfseccomp.NameWithConditions{Name: "unshare", Conditions: bpfseccomp.ArgumentConditions{
				{Argument: 0, Operation: bpfseccomp.BitsSet, Value: unshareNamespaceFlags},
			}},
			// The flags are the first argument of clone on amd64 and arm64
			// (not on s390x, which is not supported).
			bpfseccomp.NameWithConditions{Name: "clone", Conditions: bpfseccomp.ArgumentConditions{
				{Argument: 0, Operation: bpfseccomp.BitsSet, Value: newNamespaceFlags},
			}},
		)
		// clone3 passes its flags in memory, out of the filter's sight.
		groups = append(groups, bpfseccomp.SyscallGroup{Names: []string{"clone3"}, Action: actionENOSYS})
	}
	groups = append(groups, bpfseccomp.SyscallGroup{Names: deny, NamesWithCondtions: conditional, Action: bpfseccomp.ActionErrno})
	return bpfseccomp.Policy{DefaultAction: bpfseccomp.ActionAllow, Syscalls: groups}
}

// nativeArch returns go-seccomp-bpf's description of the running
// architecture.
func nativeArch() (*arch.Info, error) {
	a, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("system call filter: %w", err)
	}
	if a != arch.X86_64 && a != arch.AARCH64 {
		return nil, fmt.Errorf("system call filter: architecture %s is not supported (amd64 and arm64 are); set Confinement.Unconfined to run without the filter", a.Name)
	}
	return a, nil
}

// filterProgram returns the filter for c as BPF instructions. The
// policy's program lets the calls of other architectures through (it only
// checks its own), so a guard in front answers ENOSYS to every call whose
// audit architecture is not the native one: 32-bit calls (int 0x80 on
// amd64, AArch32 on arm64) would otherwise bypass the deny list.
func filterProgram(c Profile) ([]bpf.Instruction, error) {
	a, err := nativeArch()
	if err != nil {
		return nil, err
	}
	policy := syscallPolicy(c, a)
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("system call filter: %w", err)
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompDataArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(a.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(actionENOSYS)},
	}
	return append(guard, insts...), nil
}

// seccompDataArch is the offset of the architecture in struct
// seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64
// args[6]; }.
const seccompDataArch = 4

// Load installs the filter for c on the calling OS thread
// only (no TSYNC): the threads it creates and the processes it forks
// inherit it, across execve. The thread must hold CAP_SYS_ADMIN in its
// user namespace or have no_new_privs set. With c.AllowFUSE it returns the
// filter's notification descriptor (close-on-exec), from which the FUSE
// supervisor takes the calls the filter hands it; otherwise -1.
func Load(c Profile) (notifyFD int, err error) {
	insts, err := filterProgram(c)
	if err != nil {
		return -1, err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return -1, fmt.Errorf("system call filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	var flags uintptr
	if c.AllowFUSE {
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return -1, fmt.Errorf("system call filter: seccomp(SET_MODE_FILTER): %w", e)
	}
	if !c.AllowFUSE {
		return -1, nil
	}
	return int(r), nil
}
