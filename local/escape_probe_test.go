//go:build linux

package local_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Escape probes are attempts a hostile command would make, written in Go
// and run inside a sandbox by this very test binary, copied into a volume:
// with probeEnv set, the binary runs the probe named by its first argument
// (or each probe, see probeEach) instead of the tests, and prints its
// outcome: "ok", or the name of the
// errno the kernel (or the system call filter) answered, e.g. "EPERM". So
// a probe never fails because a tool is missing, and its answer is the
// system call's own.
const probeEnv = "AGENTBOX_ESCAPE_PROBE"

// probeMain runs the probe os.Args[1] (arguments os.Args[2:]) when this
// process is a probe, or the host helper of probeHostMain, and reports its
// exit code.
func probeMain() (int, bool) {
	if code, ok := probeHostMain(); ok {
		return code, true
	}
	if os.Getenv(probeEnv) == "" {
		return 0, false
	}
	if len(os.Args) < 2 {
		fmt.Println("error: no probe named")
		return 2, true
	}
	if os.Args[1] == probeEach {
		for _, name := range os.Args[2:] {
			fmt.Println(name, runEscapeProbe(name, nil))
		}
		return 0, true
	}
	fmt.Println(runEscapeProbe(os.Args[1], os.Args[2:]))
	return 0, true
}

// probeEach, as the first argument, runs each probe the others name,
// without arguments, and prints "name outcome" lines.
const probeEach = "-each"

// runEscapeProbe runs the probe name and returns its outcome.
func runEscapeProbe(name string, args []string) string {
	p, ok := escapeProbes[name]
	if !ok {
		return "error: unknown probe " + name
	}
	return probeOutcome(p(args))
}

// probeOutcome is "ok" for a nil error, the errno's name for an error
// wrapping one, and "error: …" otherwise.
func probeOutcome(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return "errno " + strconv.Itoa(int(errno))
	}
	return "error: " + err.Error()
}

// sys makes a raw system call and returns its error, if any.
func sys(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if e != 0 {
		return e
	}
	return nil
}

// ptr returns the address of v as a system call argument.
func ptr[T any](v *T) uintptr { return uintptr(unsafe.Pointer(v)) }

// str returns the address of a NUL-terminated copy of s.
func str(s string) uintptr {
	b, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(b))
}

// closeFD closes the fd a successful call returned.
func closeFD(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// Arguments the kernel rejects (EINVAL, EBADF) before checking privileges,
// so that a probe answers differently with and without the filter, and a
// probe that got through could not change anything.
const (
	badFD        = ^uintptr(0) // -1
	invalidFlags = 0xffff0000
)

// escapeProbes are the probes by name. Each returns the error of its
// system call (nil when it succeeded).
var escapeProbes = map[string]func(args []string) error{
	// Kernel keyrings.
	"keyctl": func([]string) error {
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_PROCESS_KEYRING, 1, 0, 0)
		return err
	},
	"add_key": func([]string) error {
		_, err := unix.AddKey("user", "agentbox-probe", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return err
	},
	"add_user_key": func(args []string) error {
		// Into the user keyring: it outlives the probe, as long as the
		// sandbox's user namespace.
		_, err := unix.AddKey("user", args[0], []byte("x"), unix.KEY_SPEC_USER_KEYRING)
		return err
	},
	"request_key": func([]string) error {
		_, err := unix.RequestKey("user", "agentbox-probe-absent", "", unix.KEY_SPEC_PROCESS_KEYRING)
		return err
	},
	// Kernel attack surface.
	"bpf": func([]string) error {
		// BPF_MAP_CREATE of a one-entry array map.
		attr := [4]uint32{unix.BPF_MAP_TYPE_ARRAY, 4, 4, 1}
		fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, ptr(&attr), unsafe.Sizeof(attr))
		return closeFD(int(fd), errnoErr(e))
	},
	"perf_event_open": func([]string) error {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK,
			Bits: unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv}
		attr.Size = uint32(unsafe.Sizeof(attr))
		return closeFD(unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC))
	},
	"userfaultfd": func([]string) error {
		const userModeOnly = 1 // UFFD_USER_MODE_ONLY: allowed without privileges
		fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|userModeOnly, 0, 0)
		return closeFD(int(fd), errnoErr(e))
	},
	"io_uring_setup": func([]string) error {
		var params [120]byte // struct io_uring_params
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, ptr(&params), 0)
		return closeFD(int(fd), errnoErr(e))
	},
	"io_uring_enter":    func([]string) error { return sys(unix.SYS_IO_URING_ENTER, badFD, 0, 0, 0, 0, 0) },
	"io_uring_register": func([]string) error { return sys(unix.SYS_IO_URING_REGISTER, badFD, 0, 0, 0) },
	"fanotify_init": func([]string) error {
		return closeFD(unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_REPORT_FID, unix.O_RDONLY))
	},
	// New namespaces.
	"clone_newuser": func([]string) error { return startIn(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}) },
	"clone_newuser_net": func([]string) error {
		return startIn(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNET})
	},
	"unshare_newuser": func([]string) error { return startIn(&syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWUSER}) },
	"clone3": func([]string) error {
		return sys(unix.SYS_CLONE3, 0, 0) // a size of 0: EINVAL from the kernel
	},
	"setns": func([]string) error {
		fd, err := unix.Open("/proc/self/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open: %v", err)
		}
		defer unix.Close(fd)
		return unix.Setns(fd, unix.CLONE_NEWUSER) // the own namespace: EINVAL from the kernel
	},
	// The mount family.
	"mount":         func([]string) error { return unix.Mount("none", "/tmp", "tmpfs", 0, "") },
	"umount2":       func([]string) error { return unix.Unmount("/usr", invalidFlags) },
	"pivot_root":    func([]string) error { return unix.PivotRoot(".", ".") },
	"open_tree":     func([]string) error { return closeFD(unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLOEXEC)) },
	"move_mount":    func([]string) error { return unix.MoveMount(-1, "", -1, "", invalidFlags) },
	"fsopen":        func([]string) error { return closeFD(unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)) },
	"fsmount":       func([]string) error { return closeFD(unix.Fsmount(-1, invalidFlags, 0)) },
	"fsconfig":      func([]string) error { return sys(unix.SYS_FSCONFIG, badFD, unix.FSCONFIG_CMD_CREATE, 0, 0, 0) },
	"fspick":        func([]string) error { return closeFD(unix.Fspick(unix.AT_FDCWD, "/", unix.FSPICK_CLOEXEC)) },
	"mount_setattr": func([]string) error { return unix.MountSetattr(-1, "", invalidFlags, &unix.MountAttr{}) },
	// Kernels and modules.
	"kexec_load":      func([]string) error { return sys(unix.SYS_KEXEC_LOAD, 0, 0, 0, invalidFlags) },
	"kexec_file_load": func([]string) error { return sys(unix.SYS_KEXEC_FILE_LOAD, badFD, badFD, 0, 0, invalidFlags) },
	"init_module":     func([]string) error { return sys(unix.SYS_INIT_MODULE, 0, 0, str("")) },
	"finit_module":    func([]string) error { return sys(unix.SYS_FINIT_MODULE, badFD, str(""), 0) },
	"delete_module": func([]string) error {
		return sys(unix.SYS_DELETE_MODULE, str("agentbox_no_such_module"), unix.O_NONBLOCK)
	},
	// File handles.
	"name_to_handle_at": func([]string) error {
		_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/tmp", 0)
		return err
	},
	"open_by_handle_at": func([]string) error {
		h := unix.NewFileHandle(1, make([]byte, 8))
		return closeFD(unix.OpenByHandleAt(unix.AT_FDCWD, h, unix.O_RDONLY))
	},
	// The whole machine.
	"reboot": func([]string) error {
		// CAD_OFF (ctrl-alt-del sends SIGINT to init) changes nothing
		// inside a PID namespace, should it ever be let through.
		return sys(unix.SYS_REBOOT, unix.LINUX_REBOOT_MAGIC1, unix.LINUX_REBOOT_MAGIC2, unix.LINUX_REBOOT_CMD_CAD_OFF)
	},
	"swapon":       func([]string) error { return sys(unix.SYS_SWAPON, str("/nonexistent"), invalidFlags) },
	"swapoff":      func([]string) error { return sys(unix.SYS_SWAPOFF, str("/nonexistent")) },
	"acct":         func([]string) error { return unix.Acct("/nonexistent") },
	"settimeofday": func([]string) error { return sys(unix.SYS_SETTIMEOFDAY, ptr(&unix.Timeval{Usec: 2_000_000}), 0) },
	"clock_settime": func([]string) error {
		return sys(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, ptr(&unix.Timespec{Nsec: -1}))
	},
	"adjtimex":      func([]string) error { _, err := unix.Adjtimex(&unix.Timex{}); return err }, // modes 0: reads
	"clock_adjtime": func([]string) error { return sys(unix.SYS_CLOCK_ADJTIME, unix.CLOCK_REALTIME, ptr(&unix.Timex{})) },
	"syslog":        func([]string) error { _, err := unix.Klogctl(unix.SYSLOG_ACTION_SIZE_BUFFER, nil); return err },
	"quotactl": func([]string) error {
		const qSync, usrQuota = 0x800001, 0
		return sys(unix.SYS_QUOTACTL, qSync<<8|usrQuota, 0, 0, 0)
	},
	"quotactl_fd":    func([]string) error { return sys(unix.SYS_QUOTACTL_FD, badFD, 0, 0, 0) },
	"vhangup":        func([]string) error { return sys(unix.SYS_VHANGUP) },
	"lookup_dcookie": func([]string) error { return sys(unix.SYS_LOOKUP_DCOOKIE, 0, 0, 0) },
	"nfsservctl":     func([]string) error { return sys(unix.SYS_NFSSERVCTL, 0, 0, 0) },
	"personality_no_aslr": func([]string) error {
		const addrNoRandomize = 0x0040000
		return sys(unix.SYS_PERSONALITY, addrNoRandomize)
	},
	"personality_query": func([]string) error { return sys(unix.SYS_PERSONALITY, 0xffffffff) },
	"socket_vsock": func([]string) error {
		return closeFD(unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0))
	},
	"socket_vsock_high_bits": func([]string) error {
		// The kernel reads the family as an int: 1<<32|AF_VSOCK is AF_VSOCK.
		fd, _, e := unix.Syscall(unix.SYS_SOCKET, 1<<32|unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return closeFD(int(fd), errnoErr(e))
	},
	"socket_unix": func([]string) error {
		return closeFD(unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0))
	},
	// The 32-bit system call ABI: a program beside this one (compatELF).
	"compat_unshare_newuser": func([]string) error {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		err = exec.Command(filepath.Join(filepath.Dir(self), compatProbeFile)).Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return syscall.Errno(exit.ExitCode())
		}
		return err
	},
	// The init (PID 1) and other processes.
	"ptrace_init": func([]string) error { return sys(unix.SYS_PTRACE, unix.PTRACE_SEIZE, 1, 0, 0) },
	"ptrace_child": func([]string) error {
		return withChild(func(pid int) error { return sys(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, 0) })
	},
	"environ_init": func([]string) error { return readFile("/proc/1/environ") },
	"environ_child": func([]string) error {
		return withChild(func(pid int) error { return readFile(fmt.Sprintf("/proc/%d/environ", pid)) })
	},
	"mem_init":       func([]string) error { return openFile("/proc/1/mem") },
	"mem_self":       func([]string) error { return openFile("/proc/self/mem") },
	"fd_links_init":  func([]string) error { return fdLinks(1) },
	"fd_links_child": func([]string) error { return withChild(fdLinks) },
	"root_link_init": func([]string) error { _, err := os.Readlink("/proc/1/root"); return err },
	"pidfd_getfd_init": func([]string) error {
		pfd, err := unix.PidfdOpen(1, 0)
		if err != nil {
			return fmt.Errorf("pidfd_open: %v", err)
		}
		defer unix.Close(pfd)
		return closeFD(unix.PidfdGetfd(pfd, 0, 0))
	},
	"process_vm_readv_init": func([]string) error {
		var b [8]byte
		local := []unix.Iovec{{Base: &b[0], Len: 8}}
		remote := []unix.RemoteIovec{{Base: 0x400000, Len: 8}}
		_, err := unix.ProcessVMReadv(1, local, remote, 0)
		return err
	},
	"kill_init":  func([]string) error { return unix.Kill(1, 0) },
	"kill_child": func([]string) error { return withChild(func(pid int) error { return unix.Kill(pid, 0) }) },
	"kill_pid": func(args []string) error {
		pid, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		return unix.Kill(pid, unix.SIGKILL)
	},
	// Abstract unix sockets: one named by the argument, and one of its own.
	"abstract_connect": func(args []string) error { return connectAbstract(args[0]) },
	"abstract_own": func([]string) error {
		name := fmt.Sprintf("agentbox-probe-own-%d", os.Getpid())
		ln, err := net.Listen("unix", "@"+name)
		if err != nil {
			return fmt.Errorf("listen: %v", err)
		}
		defer ln.Close()
		return connectAbstract(name)
	},
	// nf_tables in a nested user and network namespace (see nft_test.go).
	"nft_nested":      func(args []string) error { return nftNested(args[0]) },
	"nft_create_here": func(args []string) error { return nftCreateTable(args[0]) },
	"nft_delete_here": func(args []string) error { return nftTableBatch(unix.NFT_MSG_DELTABLE, 0, args[0]) },
}

func errnoErr(e syscall.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// startIn starts and waits for true with attr (namespaces to create), and
// returns the error of the system call that failed.
func startIn(attr *syscall.SysProcAttr) error {
	cmd := exec.Command("true")
	cmd.SysProcAttr = attr
	return cmd.Run()
}

// withChild runs f on the pid of a child process (sleep) of the probe.
func withChild(f func(pid int) error) error {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start a child: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Wait until the child runs sleep (its environ and fds are then its
	// own): /proc/PID/exe names it.
	exe := fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if l, _ := os.Readlink(exe); filepath.Base(l) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the child never ran sleep")
		}
	}
	return f(cmd.Process.Pid)
}

func readFile(name string) error {
	_, err := os.ReadFile(name)
	return err
}

func openFile(name string) error {
	f, err := os.Open(name)
	if err == nil {
		f.Close()
	}
	return err
}

// fdLinks tries to resolve and to open each of pid's file descriptors,
// and returns the first error (nil if every one worked). A descriptor
// closed meanwhile (ENOENT) is skipped; 0, 1 and 2 must be tried.
func fdLinks(pid int) error {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	tried := 0
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if _, err := os.Readlink(p); errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return err
		}
		if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		} else if !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.ENOENT) {
			// Sockets cannot be opened (ENXIO) and write-only pipes
			// refuse O_RDONLY as any file would; the link check above
			// is what access control decides.
			return err
		}
		if n, _ := strconv.Atoi(e.Name()); n <= 2 {
			tried++
		}
	}
	if tried < 3 {
		return fmt.Errorf("file descriptors 0, 1 and 2 not all listed in %s", dir)
	}
	return nil
}

func connectAbstract(name string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %v", err)
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + name})
}

// compatProbeFile is the name, beside the probe binary, of compatELF.
const compatProbeFile = "compat-unshare"

// compatELF returns a static x86-64 program that calls unshare
// (CLONE_NEWUSER) through the 32-bit system call ABI (int 0x80, i386
// number 310) and exits with the errno it got (0 on success), through the
// native ABI.
func compatELF() []byte {
	code := []byte{
		0xb8, 0x36, 0x01, 0x00, 0x00, // mov eax, 310
		0xbb, 0x00, 0x00, 0x00, 0x10, // mov ebx, CLONE_NEWUSER
		0xcd, 0x80, // int 0x80
		0x89, 0xc7, // mov edi, eax
		0xf7, 0xdf, // neg edi
		0xb8, 0x3c, 0x00, 0x00, 0x00, // mov eax, 60 (exit)
		0x0f, 0x05, // syscall
	}
	const base, ehsize, phsize = 0x400000, 64, 56
	le := binary.LittleEndian
	b := make([]byte, ehsize+phsize, ehsize+phsize+len(code))
	copy(b, []byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */, 1 /* version */})
	le.PutUint16(b[16:], 2)                  // ET_EXEC
	le.PutUint16(b[18:], 0x3e)               // EM_X86_64
	le.PutUint32(b[20:], 1)                  // EV_CURRENT
	le.PutUint64(b[24:], base+ehsize+phsize) // entry point: the code
	le.PutUint64(b[32:], ehsize)             // program headers
	le.PutUint16(b[52:], ehsize)             // header size
	le.PutUint16(b[54:], phsize)             // program header size
	le.PutUint16(b[56:], 1)                  // one program header
	ph := b[ehsize:]
	le.PutUint32(ph[0:], 1)                                // PT_LOAD
	le.PutUint32(ph[4:], 5)                                // R+X
	le.PutUint64(ph[16:], base)                            // vaddr
	le.PutUint64(ph[24:], base)                            // paddr
	le.PutUint64(ph[32:], uint64(ehsize+phsize+len(code))) // file size
	le.PutUint64(ph[40:], uint64(ehsize+phsize+len(code))) // memory size
	le.PutUint64(ph[48:], 0x1000)                          // alignment
	return append(b, code...)
}
