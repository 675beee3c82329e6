//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Escape probes for the confinement of commands (seccomp filter, Landlock,
// the init's protection): each subtest is an attempt a hostile command
// would make, made with the system call itself by this test binary run
// inside the sandbox (escape_probe_test.go). Each asserts the exact answer
// under the default confinement and, as proof that the probe really asks
// the kernel, the answer with Confinement.Unconfined: where the two
// differ, the filter (or Landlock) is what refused.

// probeVolume is the volume, mounted at /probe, that holds the probes.
const (
	probeVolume = "escape-probes"
	probeBinary = "/probe/agentbox-probe"
)

// installProbes copies this test binary, and the 32-bit ABI probe, into
// the volume probeVolume of stateDir.
func installProbes(t testing.TB, stateDir string) {
	t.Helper()
	dir := filepath.Join(stateDir, "volumes", probeVolume)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	dst, err := os.OpenFile(filepath.Join(dir, filepath.Base(probeBinary)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, self); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, compatProbeFile), compatELF(), 0o755); err != nil {
		t.Fatal(err)
	}
}

// probeConfig is a Config with c and the probes' volume.
func probeConfig(c local.Confinement) local.Config {
	return local.Config{Confinement: c, Volumes: []local.Volume{{Name: probeVolume, MountPath: filepath.Dir(probeBinary), ReadOnly: true}}}
}

// newProbeSandbox starts a sandbox with confinement c and the probes.
func newProbeSandbox(t testing.TB, c local.Confinement) *local.Sandbox {
	t.Helper()
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	return newSandbox(t, local.Options{StateDir: stateDir, Config: probeConfig(c)})
}

// probeCommand is the shell command that runs probe name with args.
func probeCommand(name string, args ...string) string {
	cmd := "env " + probeEnv + "=1 " + probeBinary + " " + name
	for _, a := range args {
		cmd += " " + sandbox.ShellQuote(a)
	}
	return cmd
}

// probeScript runs the probes names (without arguments) and prints
// "name outcome" lines.
func probeScript(names []string) string {
	return probeCommand(probeEach, names...)
}

// parseProbes returns the outcomes of probeScript's output by name.
func parseProbes(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, outcome, _ := strings.Cut(line, " ")
		got[name] = outcome
	}
	return got
}

// runProbes runs the probes names in sb and returns their outcomes.
func runProbes(t testing.TB, sb sandbox.Sandbox, names []string) map[string]string {
	t.Helper()
	return parseProbes(mustRun(t, sb, probeScript(names)))
}

// runProbe runs one probe, with arguments, in sb and returns its outcome.
func runProbe(t testing.TB, sb sandbox.Sandbox, name string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, sb, probeCommand(name, args...)))
}

// A syscallCase is a probe whose outcome depends on the sandbox only.
type syscallCase struct {
	name string
	// confined is the outcome under the default confinement.
	confined string
	// unconfined lists the outcomes accepted with Confinement.Unconfined
	// (more than one where kernels differ).
	unconfined []string
}

// syscallCases are the probes of the filter and of the init's protection.
// An "ok" outcome of a control probe shows the probe mechanism works where
// its neighbour is refused.
var syscallCases = []syscallCase{
	// Kernel keyrings: shared by every process of a host uid.
	{"keyctl", "EPERM", []string{"ok"}},
	{"add_key", "EPERM", []string{"ok"}},
	{"request_key", "EPERM", []string{"ENOKEY", "ENOENT"}},
	// Kernel attack surface.
	{"bpf", "EPERM", []string{"EPERM"}}, // unprivileged BPF is off here too
	{"perf_event_open", "EPERM", []string{"ok", "EACCES"}},
	{"userfaultfd", "EPERM", []string{"ok"}},
	{"io_uring_setup", "EPERM", []string{"ok"}},
	{"io_uring_enter", "EPERM", []string{"EBADF"}},
	{"io_uring_register", "EPERM", []string{"EBADF", "EINVAL"}},
	{"fanotify_init", "EPERM", []string{"ok"}},
	// New namespaces.
	{"clone_newuser", "EPERM", []string{"ok"}},
	{"clone_newuser_net", "EPERM", []string{"ok"}},
	{"unshare_newuser", "EPERM", []string{"ok"}},
	{"clone3", "ENOSYS", []string{"EINVAL"}},
	{"setns", "EPERM", []string{"EINVAL"}},
	// The mount family (without capabilities, most fail anyway).
	{"mount", "EPERM", []string{"EPERM"}},
	{"umount2", "EPERM", []string{"EINVAL"}},
	{"pivot_root", "EPERM", []string{"EPERM"}},
	{"open_tree", "EPERM", []string{"ok"}},
	{"move_mount", "EPERM", []string{"EPERM", "EINVAL"}},
	{"fsopen", "EPERM", []string{"EPERM"}},
	{"fsmount", "EPERM", []string{"EPERM", "EINVAL"}},
	{"fsconfig", "EPERM", []string{"EBADF", "EINVAL"}},
	{"fspick", "EPERM", []string{"EPERM"}},
	{"mount_setattr", "EPERM", []string{"EINVAL"}},
	// Kernels and modules (ENOSYS: not built into this kernel).
	{"kexec_load", "EPERM", []string{"ENOSYS", "EPERM"}},
	{"kexec_file_load", "EPERM", []string{"ENOSYS", "EPERM"}},
	{"init_module", "EPERM", []string{"ENOSYS", "EPERM"}},
	{"finit_module", "EPERM", []string{"ENOSYS", "EPERM"}},
	{"delete_module", "EPERM", []string{"ENOSYS", "EPERM"}},
	// File handles.
	{"name_to_handle_at", "EPERM", []string{"ok"}},
	{"open_by_handle_at", "EPERM", []string{"EPERM", "ESTALE", "EINVAL"}},
	// The whole machine.
	{"reboot", "EPERM", []string{"EPERM"}},
	{"swapon", "EPERM", []string{"EINVAL"}},
	{"swapoff", "EPERM", []string{"EPERM"}},
	{"acct", "EPERM", []string{"EPERM"}},
	{"settimeofday", "EPERM", []string{"EINVAL"}},
	{"clock_settime", "EPERM", []string{"EINVAL"}},
	{"adjtimex", "EPERM", []string{"ok"}},
	{"clock_adjtime", "EPERM", []string{"ok"}},
	{"syslog", "EPERM", []string{"EPERM", "ok"}},
	{"quotactl", "EPERM", []string{"ok", "ENOSYS"}},
	{"quotactl_fd", "EPERM", []string{"EBADF", "ENOSYS"}},
	{"vhangup", "EPERM", []string{"EPERM"}},
	{"lookup_dcookie", "EPERM", []string{"ENOSYS", "EPERM", "EINVAL"}},
	{"nfsservctl", "EPERM", []string{"ENOSYS"}},
	{"personality_no_aslr", "EPERM", []string{"ok"}},
	{"personality_query", "ok", []string{"ok"}},
	{"socket_vsock", "EPERM", []string{"ok", "EAFNOSUPPORT"}},
	{"socket_vsock_high_bits", "EPERM", []string{"ok", "EAFNOSUPPORT"}},
	{"socket_unix", "ok", []string{"ok"}},
	// The init: not dumpable, whatever the confinement.
	{"ptrace_init", "EPERM", []string{"EPERM"}},
	{"ptrace_child", "ok", []string{"ok"}},
	{"environ_init", "EACCES", []string{"EACCES"}},
	{"environ_child", "ok", []string{"ok"}},
	{"mem_init", "EACCES", []string{"EACCES"}},
	{"mem_self", "ok", []string{"ok"}},
	{"fd_links_init", "EACCES", []string{"EACCES"}},
	{"fd_links_child", "ok", []string{"ok"}},
	{"root_link_init", "EACCES", []string{"EACCES"}},
	{"pidfd_getfd_init", "EPERM", []string{"EPERM"}},
	{"process_vm_readv_init", "EPERM", []string{"EPERM"}},
	{"kill_child", "ok", []string{"ok"}},
	{"abstract_own", "ok", []string{"ok"}},
}

// landlockCases need Landlock scoping (ABI 6).
var landlockCases = []syscallCase{
	{"kill_init", "EPERM", []string{"ok"}},
}

// compatCases need the 32-bit x86 ABI.
var compatCases = []syscallCase{
	{"compat_unshare_newuser", "ENOSYS", []string{"ok"}},
}

// kernelLandlockABI returns the running kernel's Landlock ABI (0: none).
func kernelLandlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// applicableCases returns the cases this machine can run, and logs why it
// leaves others out: both need kernel features (no tool can provide
// them).
func applicableCases(t *testing.T) []syscallCase {
	cases := slices.Clone(syscallCases)
	if abi := kernelLandlockABI(); abi >= 6 {
		cases = append(cases, landlockCases...)
	} else {
		t.Logf("Landlock scoping is not in this kernel (ABI %d): %d probes left out", abi, len(landlockCases))
	}
	if compatABIAvailable(t) {
		cases = append(cases, compatCases...)
	} else {
		t.Logf("this kernel runs no 32-bit x86 system calls: %d probes left out (TestSyscallFilterProgram covers the guard)", len(compatCases))
	}
	return cases
}

func caseNames(cases []syscallCase) []string {
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return names
}

// TestEscapeSyscalls runs every syscallCase in a default sandbox and in an
// unconfined one.
func TestEscapeSyscalls(t *testing.T) {
	cases := applicableCases(t)
	names := caseNames(cases)
	confined := runProbes(t, newProbeSandbox(t, local.Confinement{}), names)
	unconfined := runProbes(t, newProbeSandbox(t, local.Confinement{Unconfined: true}), names)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := confined[c.name]; got != c.confined {
				t.Errorf("confined: %q, want %s", got, c.confined)
			}
			if got := unconfined[c.name]; !slices.Contains(c.unconfined, got) {
				t.Errorf("unconfined (the probe's control): %q, want one of %q", got, c.unconfined)
			}
		})
	}
}

// compatABIAvailable reports whether the kernel runs the 32-bit ABI probe
// (amd64 only): run on the host, its unshare succeeds or fails, but it
// exits (without the ABI, int 0x80 kills it with SIGSEGV).
func compatABIAvailable(t *testing.T) bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	p := filepath.Join(t.TempDir(), compatProbeFile)
	if err := os.WriteFile(p, compatELF(), 0o755); err != nil {
		t.Fatal(err)
	}
	err := exec.Command(p).Run()
	var exit *exec.ExitError
	return err == nil || errors.As(err, &exit) && exit.Exited()
}

// TestEscapeSyscallsUnprivileged runs the syscallCases in a sandbox that an
// ordinary user (uid 2001) made: the confinement is the same.
func TestEscapeSyscallsUnprivileged(t *testing.T) {
	testenv.NeedRoot(t, "needs root to switch to another uid; as a non-root user TestEscapeSyscalls is the unprivileged case")
	cases := applicableCases(t)
	stateDir := newSharedStateDir(t, "agentbox-escape-unpriv-")
	installProbes(t, stateDir)
	if err := filepath.Walk(stateDir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 2001, 2001)
	}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe", caseNames(cases)...)
	cmd.Env = []string{probeHostEnv + "=" + stateDir, "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 2001, Gid: 2001, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid 2001: %v\n%s", err, out)
	}
	got := parseProbes(string(out))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got[c.name] != c.confined {
				t.Errorf("confined, unprivileged: %q, want %s", got[c.name], c.confined)
			}
		})
	}
}

// probeHostEnv makes this binary a host helper: it starts a default
// sandbox with the probes in the state dir the variable names, runs the
// probes named by its arguments, prints probeScript's output, and
// destroys the sandbox.
const probeHostEnv = "AGENTBOX_ESCAPE_PROBE_HOST"

// probeHostMain runs the probeHostEnv helper, when this process is one.
func probeHostMain() (int, bool) {
	stateDir := os.Getenv(probeHostEnv)
	if stateDir == "" {
		return 0, false
	}
	ctx := context.Background()
	cfg := probeConfig(local.Confinement{})
	// Without root the default network is not available.
	if os.Geteuid() != 0 {
		cfg.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}
	}
	sb, err := local.New(local.Options{StateDir: stateDir, Config: cfg})
	if err != nil {
		fmt.Println("error:", err)
		return 1, true
	}
	defer sb.Destroy(ctx)
	r, err := sb.ExecuteCommand(ctx, probeScript(os.Args[1:]), nil, nil)
	if err != nil {
		fmt.Println("error:", err)
		return 1, true
	}
	fmt.Print(r.Stdout)
	return 0, true
}

// TestEscapeEveryCommandFiltered: one-shot commands, commands with stdin,
// background processes and their descendants (a daemonised one included)
// all run under the filter and no_new_privs; an unconfined sandbox's do
// not.
func TestEscapeEveryCommandFiltered(t *testing.T) {
	ctx := context.Background()
	const status = `grep -E "^(Seccomp|Seccomp_filters|NoNewPrivs):" /proc/self/status | tr -d "\t" | tr "\n" " "`
	want := "NoNewPrivs:1 Seccomp:2 Seccomp_filters:1 "
	sb := newSandbox(t, local.Options{})
	check := func(how, got string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", how, got, want)
		}
	}
	check("one-shot", mustRun(t, sb, status))
	check("grandchild", mustRun(t, sb, "sh -c "+sandbox.ShellQuote("sh -c "+sandbox.ShellQuote(status))))
	r, err := sb.ExecuteCommand(ctx, status, nil, &sandbox.ExecOptions{Stdin: strings.NewReader("")})
	if err != nil {
		t.Fatal(err)
	}
	check("with stdin", r.Stdout)
	p, err := sb.Processes().Spawn(ctx, status, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("background process", pr.Stdout)
	mustRun(t, sb, "setsid sh -c "+sandbox.ShellQuote(status+" > /tmp/daemon.out")+" < /dev/null > /dev/null 2>&1 &")
	var daemon string
	poll(5*time.Second, func() bool { daemon = run(t, sb, "cat /tmp/daemon.out 2>/dev/null").Stdout; return daemon != "" })
	check("daemonised", daemon)

	free := newSandbox(t, local.Options{Config: local.Config{Confinement: local.Confinement{Unconfined: true}}})
	if got := mustRun(t, free, status); got != "NoNewPrivs:1 Seccomp:0 Seccomp_filters:0 " {
		t.Errorf("unconfined: %q, want no filter (and still no_new_privs)", got)
	}
}

// TestEscapeAbstractSocket: a command cannot connect to an abstract unix
// socket of the host: abstract sockets belong to a network namespace, and
// a sandbox has one of its own; with HostNetwork it shares the host's,
// and Landlock refuses the connection (where the kernel has Landlock
// scoping), which an unconfined HostNetwork sandbox proves.
func TestEscapeAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("agentbox-escape-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	start := func(c local.Config) *local.Sandbox {
		c.Volumes = probeConfig(c.Confinement).Volumes
		return newSandbox(t, local.Options{StateDir: stateDir, Config: c})
	}
	sb := start(local.Config{})
	if got := runProbe(t, sb, "abstract_connect", name); got != "ECONNREFUSED" {
		t.Errorf("connect to the host's abstract socket @%s by default: %q, want ECONNREFUSED (not in the sandbox's namespace)", name, got)
	}
	if got := runProbe(t, sb, "abstract_own"); got != "ok" {
		t.Errorf("connect to an abstract socket of the sandbox: %q, want ok", got)
	}
	free := start(local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}, Confinement: local.Confinement{Unconfined: true}})
	if got := runProbe(t, free, "abstract_connect", name); got != "ok" {
		t.Errorf("control: an unconfined HostNetwork sandbox connecting to @%s: %q, want ok", name, got)
	}
	// The probe's connect returned once the kernel queued the connection;
	// the accept may come a little later.
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Errorf("the host socket accepted no connection from the unconfined sandbox")
	}
	if kernelLandlockABI() >= 6 {
		host := start(local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}})
		if got := runProbe(t, host, "abstract_connect", name); got != "EPERM" {
			t.Errorf("connect to the host's abstract socket @%s with HostNetwork: %q, want EPERM (Landlock)", name, got)
		}
	} else {
		t.Log("no Landlock scoping (ABI 6) in this kernel: HostNetwork sandboxes reach the host's abstract sockets")
	}
	select {
	case <-accepted:
		t.Errorf("the host socket accepted more than the control's connection")
	default:
	}
}

// TestEscapeKillHostProcess: a host process is neither visible nor
// killable from a sandbox.
func TestEscapeKillHostProcess(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	sb := newProbeSandbox(t, local.Confinement{})
	pid := strconv.Itoa(sleep.Process.Pid)
	if got := runProbe(t, sb, "kill_pid", pid); got != "ESRCH" {
		t.Errorf("kill(%s) inside: %q, want ESRCH", pid, got)
	}
	if r := run(t, sb, "kill -9 "+pid); r.ExitCode == 0 {
		t.Errorf("kill -9 %s inside succeeded", pid)
	}
	if err := sleep.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the host process is gone: %v", err)
	}
}
