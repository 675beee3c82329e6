package seccomp

import (
	"encoding/binary"
	"testing"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSyscallNamesOnEveryArch: every call the filter names exists in
// go-seccomp-bpf's tables of both supported architectures, so the filter
// assembles on arm64 as it does here (calls of deniedWhereDefined may be
// missing: the policy leaves them out).
func TestSyscallNamesOnEveryArch(t *testing.T) {
	for _, a := range []*arch.Info{arch.X86_64, arch.AARCH64} {
		for _, c := range []Profile{{}, {AllowNestedNamespaces: true}} {
			p := syscallPolicy(c, a)
			for _, g := range p.Syscalls {
				names := g.Names
				for _, nc := range g.NamesWithCondtions {
					names = append(names, nc.Name)
				}
				for _, n := range names {
					if _, ok := a.SyscallNames[n]; !ok {
						t.Errorf("%s: %s is not a system call of %s", a.Name, n, a.Name)
					}
				}
			}
		}
	}
}

// call is one system call as the filter sees it.
type call struct {
	arch uint32
	nr   int
	args [6]uint64
}

// data returns c as the filter reads struct seccomp_data: the x/net/bpf
// VM loads 32-bit words big-endian, so each word is stored big-endian at
// the offset where the kernel keeps it in native (little-endian) order.
func (c call) data() []byte {
	b := make([]byte, 64)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(c.nr))
	be.PutUint32(b[seccompDataArch:], c.arch)
	for i, a := range c.args {
		off := 16 + 8*i
		be.PutUint32(b[off:], uint32(a))       // low word first (little-endian)
		be.PutUint32(b[off+4:], uint32(a>>32)) // then the high word
	}
	return b
}

// TestSyscallFilterProgram runs the filter in a BPF interpreter on calls
// that matter: what it refuses, how, and what it lets through, for every
// architecture a process may call the kernel with.
func TestSyscallFilterProgram(t *testing.T) {
	native, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the test encodes seccomp_data for little-endian machines")
	}
	nr := func(name string) int {
		n, ok := native.SyscallNames[name]
		if !ok {
			t.Fatalf("no system call %s on %s", name, native.Name)
		}
		return n
	}
	sys := func(name string, args ...uint64) call {
		c := call{arch: uint32(native.ID), nr: nr(name)}
		copy(c.args[:], args)
		return c
	}
	const (
		allow  = uint32(bpfseccomp.ActionAllow)
		eperm  = uint32(bpfseccomp.ActionErrno) | uint32(unix.EPERM)
		enosys = uint32(actionENOSYS)
	)
	compat := arch.I386
	if native == arch.AARCH64 {
		compat = arch.ARM
	}
	clone := func(flags uint64) call { return sys("clone", flags) }
	tests := []struct {
		what string
		c    call
		want uint32 // default confinement
		nest uint32 // AllowNestedNamespaces
	}{
		{"getpid", sys("getpid"), allow, allow},
		{"keyctl", sys("keyctl"), eperm, eperm},
		{"io_uring_setup", sys("io_uring_setup"), eperm, eperm},
		{"a 32-bit call", call{arch: uint32(compat.ID), nr: compat.SyscallNames["getpid"]}, enosys, enosys},
		{"a 32-bit unshare", call{arch: uint32(compat.ID), nr: compat.SyscallNames["unshare"], args: [6]uint64{unix.CLONE_NEWUSER}}, enosys, enosys},
		{"fork (clone)", clone(unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)), allow, allow},
		{"a thread (clone)", clone(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD), allow, allow},
		{"clone a user namespace", clone(unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)), eperm, allow},
		{"clone a network namespace, high bits set", clone(1<<40 | unix.CLONE_NEWNET), eperm, allow},
		{"clone3", sys("clone3"), enosys, allow},
		{"unshare CLONE_FS", sys("unshare", unix.CLONE_FS|unix.CLONE_FILES), allow, allow},
		{"unshare a user namespace", sys("unshare", unix.CLONE_NEWUSER), eperm, allow},
		{"unshare a time namespace", sys("unshare", unix.CLONE_NEWTIME), eperm, allow},
		{"setns", sys("setns"), eperm, allow},
		{"mount", sys("mount"), eperm, allow},
		{"fsopen", sys("fsopen"), eperm, allow},
		{"socket AF_INET", sys("socket", unix.AF_INET), allow, allow},
		{"socket AF_UNIX", sys("socket", unix.AF_UNIX), allow, allow},
		{"socket AF_VSOCK", sys("socket", unix.AF_VSOCK), eperm, eperm},
		{"socket AF_VSOCK, high bits set", sys("socket", 7<<32|unix.AF_VSOCK), eperm, eperm},
		{"socket 40|1<<8 (not AF_VSOCK)", sys("socket", 1<<8|unix.AF_VSOCK), allow, allow},
		{"personality query", sys("personality", 0xffffffff), allow, allow},
		{"personality PER_LINUX", sys("personality", 0), allow, allow},
		{"personality ADDR_NO_RANDOMIZE", sys("personality", 0x0040000), eperm, eperm},
		{"personality 1<<32 (PER_LINUX to the kernel)", sys("personality", 1<<32), eperm, eperm},
		{"ptrace (allowed: the init is not dumpable)", sys("ptrace"), allow, allow},
	}
	if x32, ok := native.SyscallNames["getpid"]; ok && native == arch.X86_64 {
		tests = append(tests, struct {
			what       string
			c          call
			want, nest uint32
		}{"an x32 call", call{arch: uint32(native.ID), nr: x32 | 0x40000000}, enosys, enosys})
	}
	for _, c := range []Profile{{}, {AllowNestedNamespaces: true}} {
		prog, err := filterProgram(c)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			want := tt.want
			if c.AllowNestedNamespaces {
				want = tt.nest
			}
			got, err := vm.Run(tt.c.data())
			if err != nil {
				t.Fatalf("%s: %v", tt.what, err)
			}
			if uint32(got) != want {
				t.Errorf("%+v: %s: %#x, want %#x", c, tt.what, got, want)
			}
		}
	}
}
