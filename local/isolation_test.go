//go:build linux

package local_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestIsolation(t *testing.T) {
	// A host process and a host file the sandbox must not see.
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(home, "agentbox-isolation-marker-"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(marker, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(marker)

	// The host's system folders read-only, no capability: the posture
	// without root, asked for as root (hostroot_linux_test.go tests the
	// writable root root gives by default).
	sb := newSandbox(t, local.Options{Config: local.Config{ReadOnlyRoot: true}})

	t.Run("pid1-is-init", func(t *testing.T) {
		out := mustRun(t, sb, "cat /proc/1/cmdline | tr '\\0' ' '; echo; echo $$")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.HasPrefix(lines[0], "agentbox-init ") {
			t.Errorf("PID 1 is %q, want the agentbox init", lines[0])
		}
		if lines[1] == "1" {
			t.Errorf("the command itself is PID 1")
		}
	})
	t.Run("host-processes-invisible", func(t *testing.T) {
		pid := strconv.Itoa(sleep.Process.Pid)
		out := mustRun(t, sb, "ls /proc | grep -c '^[0-9]' ; test -e /proc/"+pid+" && echo visible || echo hidden")
		if !strings.Contains(out, "hidden") {
			t.Errorf("host pid %s is visible inside: %s", pid, out)
		}
		n, _ := strconv.Atoi(strings.Fields(out)[0])
		if n > 10 {
			t.Errorf("sandbox sees %d processes; want only its own few", n)
		}
	})
	t.Run("hostname", func(t *testing.T) {
		host, _ := os.Hostname()
		got := strings.TrimSpace(mustRun(t, sb, "hostname"))
		if got == host || got != sb.ID() {
			t.Errorf("hostname inside = %q, host = %q, want the sandbox id %q", got, host, sb.ID())
		}
	})
	t.Run("host-home-invisible", func(t *testing.T) {
		r := run(t, sb, "cat "+marker+"; ls "+home)
		if r.ExitCode == 0 || strings.Contains(r.Stdout, "host secret") {
			t.Errorf("host marker readable inside: exit %d, %q", r.ExitCode, r.Stdout)
		}
	})
	t.Run("system-dirs-read-only", func(t *testing.T) {
		for _, p := range []string{"/usr/agentbox-probe", "/etc/agentbox-probe", "/agentbox-probe", "/usr/bin/true"} {
			r := run(t, sb, "echo x > "+p)
			if r.ExitCode == 0 {
				t.Errorf("writing %s succeeded", p)
			} else if !strings.Contains(r.Stderr, "Read-only file system") {
				t.Errorf("writing %s: %q, want a read-only error", p, r.Stderr)
			}
			if _, err := os.Stat(p); err == nil && p != "/usr/bin/true" {
				os.Remove(p)
				t.Errorf("%s appeared on the host", p)
			}
		}
		mustRun(t, sb, "echo ok > ~/w && echo ok > /tmp/w && cat ~/w /tmp/w")
		// Root of the sandbox may remount its own view read-write, but the
		// host's files stay out of reach: their owners are not mapped.
		for _, d := range []string{"/usr", "/etc"} {
			probe := d + "/agentbox-remount-probe"
			r := run(t, sb, "mount -o remount,rw,bind "+d+" 2>/dev/null; touch "+probe)
			if r.ExitCode == 0 {
				t.Errorf("after a remount, creating %s succeeded", probe)
			}
			if _, err := os.Stat(probe); err == nil {
				os.Remove(probe)
				t.Errorf("%s appeared on the host", probe)
			}
		}
	})
	t.Run("no-capabilities", func(t *testing.T) {
		// Root inside has no capabilities at all: it cannot mount, remount
		// or regain them through a setuid or file-capability binary.
		out := mustRun(t, sb, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			want := "0000000000000000"
			if f[0] == "NoNewPrivs:" {
				want = "1"
			}
			if len(f) != 2 || f[1] != want {
				t.Errorf("%q: want %s", line, want)
			}
		}
		if r := run(t, sb, "mount -t tmpfs none /tmp"); r.ExitCode == 0 {
			t.Errorf("mounting a tmpfs inside succeeded")
		}
		if r := run(t, sb, "mount -o remount,rw /usr"); r.ExitCode == 0 || !strings.Contains(r.Stderr, "permission denied") {
			t.Errorf("remounting /usr: exit %d, %q; want permission denied", r.ExitCode, r.Stderr)
		}
	})
	t.Run("tmp-is-the-users", func(t *testing.T) {
		if out := mustRun(t, sb, "ls -A /tmp"); strings.Contains(out, "agentbox") {
			t.Errorf("the toolbox server keeps files in the user's /tmp: %q", out)
		}
	})
	t.Run("orphans-reaped", func(t *testing.T) {
		mustRun(t, sb, "for i in 1 2 3; do (sleep 0.05 &) ; done; setsid sh -c 'sleep 0.05 &' ; true")
		// Until the orphans have ended (none runs) and been reaped (no
		// zombie is left).
		var out string
		poll(5*time.Second, func() bool {
			out = mustRun(t, sb, "ps -eo stat,pid,ppid,args | awk '$1 ~ /^Z/ || /sleep 0[.]05/' ")
			return out == ""
		})
		if out != "" {
			t.Errorf("orphans left or not reaped inside: %s", out)
		}
	})
	t.Run("cgroup-namespace", func(t *testing.T) {
		// Commands see their own cgroups as the root of every hierarchy
		// ("0::/" on v2, "N:controllers:/" on v1), never host paths.
		out := mustRun(t, sb, "cat /proc/self/cgroup")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, line := range lines {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 || f[2] != "/" {
				t.Errorf("/proc/self/cgroup inside: %q is not a root path (all: %q)", line, out)
			}
		}
		if len(lines) == 0 {
			t.Errorf("empty /proc/self/cgroup inside")
		}
	})
	t.Run("namespaces", func(t *testing.T) {
		// The init is in its own namespaces of every kind, net included.
		pid := local.InitPID(sb)
		for _, ns := range []string{"ipc", "uts", "cgroup", "user", "mnt", "pid", "net"} {
			host, err := os.Readlink("/proc/self/ns/" + ns)
			if err != nil {
				t.Fatal(err)
			}
			own, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
			if err != nil {
				t.Fatal(err)
			}
			if own == host {
				t.Errorf("%s namespace: init %s, host %s", ns, own, host)
			}
		}
		// Commands are in the init's namespaces except the cgroup one,
		// unshared below it by the thread that starts them.
		out := mustRun(t, sb, "readlink /proc/self/ns/cgroup /proc/self/ns/pid")
		initCg, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/cgroup")
		initPid, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
		if f := strings.Fields(out); len(f) != 2 || f[0] == initCg || f[1] != initPid {
			t.Errorf("namespaces of a command %q, of the init %s %s", out, initCg, initPid)
		}
	})
	t.Run("identity", func(t *testing.T) {
		out := mustRun(t, sb, "id -u; echo $HOME; pwd; cat /proc/self/uid_map")
		f := strings.Fields(out)
		if f[0] != "0" || f[1] != "/home/agent" || f[2] != "/home/agent" {
			t.Errorf("identity: %q", out)
		}
		if os.Geteuid() == 0 && f[4] == "0" {
			t.Errorf("sandbox root is host root: uid_map %q", out)
		}
	})
}

func TestNetworkBlockAll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from host\n"))
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	probe := "timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + port + " && head -1 <&3'"

	blocked := newSandbox(t, local.Options{Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	r := run(t, blocked, probe)
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "hello") {
		t.Errorf("blocked sandbox reached the host's loopback server: %q", r.Stdout)
	}
	if out := mustRun(t, blocked, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"); strings.TrimSpace(out) != "lo" {
		t.Errorf("interfaces in blocked sandbox: %q, want only lo", out)
	}
	// Loopback inside works.
	// Loopback is up: a closed port refuses instead of being unreachable.
	if r := run(t, blocked, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/1' 2>&1"); !strings.Contains(r.Stdout, "refused") {
		t.Errorf("loopback inside a blocked sandbox: %q, want connection refused", r.Stdout)
	}
	// Only a HostNetwork sandbox shares the host's network namespace.
	shared := newSandbox(t, local.Options{Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}})
	def := newSandbox(t, local.Options{})
	for _, c := range []struct {
		sb   *local.Sandbox
		want bool
	}{{blocked, true}, {def, true}, {shared, false}} {
		host, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		own, err := os.Readlink("/proc/" + strconv.Itoa(local.InitPID(c.sb)) + "/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		if (own != host) != c.want {
			t.Errorf("own network %v: init net namespace %s, host %s", c.want, own, host)
		}
	}
	if !strings.Contains(blocked.Instructions(), "Network access is blocked.") {
		t.Errorf("instructions do not say the network is blocked: %s", blocked.Instructions())
	}

	if out := mustRun(t, shared, probe); !strings.Contains(out, "hello from host") {
		t.Errorf("HostNetwork sandbox did not reach the host: %q", out)
	}
	if r := run(t, def, probe); r.ExitCode == 0 || strings.Contains(r.Stdout, "hello") {
		t.Errorf("a default sandbox reached the host's loopback server: %q", r.Stdout)
	}
}

// TestUnprivileged runs a sandbox as an ordinary user (uid 2001) with a
// single-uid user namespace, with the default network (the user-mode
// network, which Info names) and with the network blocked.
func TestUnprivileged(t *testing.T) {
	testenv.NeedRoot(t, "needs root to switch to another uid; as a non-root user every test here is the unprivileged case")
	stateDir := newSharedStateDir(t, "agentbox-unpriv-")
	if err := os.Chown(stateDir, 2001, 2001); err != nil {
		t.Fatal(err)
	}
	helper := func(mode string, env ...string) *exec.Cmd {
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = append([]string{helperEnv + "=" + mode, "HELPER_ID=unpriv", "HELPER_STATE_DIR=" + stateDir, "HOME=/nonexistent", "PATH=/usr/bin:/bin"}, env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 2001, Gid: 2001, Groups: []uint32{}}}
		return cmd
	}
	for _, network := range []string{"default", "blocked"} {
		var env []string
		if network == "blocked" {
			env = append(env, "HELPER_BLOCK_NETWORK=1")
		}
		cmd := helper("unprivileged", env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := testenv.StartUnprivileged(t, nil, cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper as uid 2001, network %s: %v\n%s", network, err, out.String())
		}
		var got string
		if _, err := fmt.Sscanf(out.String(), "%q", &got); err != nil {
			t.Fatalf("helper output %q: %v", out.String(), err)
		}
		lines := strings.Split(got, "\n")
		if len(lines) < 5 || lines[0] != "0" || !strings.HasPrefix(lines[1], "agentbox-init unpriv") || lines[2] != "unpriv" ||
			strings.Join(strings.Fields(lines[3]), " ") != "0 2001 1" || lines[4] != "ro" {
			t.Errorf("inside an unprivileged sandbox, network %s: %q", network, got)
		}
		// The mode and the note of Info, and the interfaces inside.
		info := out.String()
		switch network {
		case "default":
			if !strings.Contains(info, "mode public") || !strings.Contains(info, "user-mode") {
				t.Errorf("Info of a default sandbox without root does not say its network is the public mode, user-mode: %s", info)
			}
			if !strings.Contains(got, "ab0") {
				t.Errorf("no user-mode network device inside a default sandbox without root: %q", got)
			}
		case "blocked":
			if strings.Contains(info, "user-mode") || strings.Contains(got, "ab0") {
				t.Errorf("a blocked sandbox without root has the user-mode network: %s", info)
			}
		}
		if ents, _ := os.ReadDir(filepath.Join(stateDir, "sandboxes")); len(ents) != 0 {
			t.Errorf("destroy left %v", ents)
		}
	}
}

// TestIsolationUnavailable starts a sandbox where user namespaces are
// forbidden: Start must fail with ErrIsolationUnavailable, saying what to
// do, and leave nothing behind.
func TestIsolationUnavailable(t *testing.T) {
	stateDir := newSharedStateDir(t, "agentbox-nouserns-")
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{helperEnv + "=start", "HELPER_ID=nouserns", "HELPER_STATE_DIR=" + stateDir, "HELPER_NO_USERNS=1", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("sandbox started without user namespaces: %s", out)
	}
	if !strings.Contains(string(out), "isolation unavailable") || !strings.Contains(string(out), "max_user_namespaces") {
		t.Errorf("error does not say why: %s", out)
	}
	if ents, _ := os.ReadDir(filepath.Join(stateDir, "sandboxes")); len(ents) != 0 {
		t.Errorf("a failed start left %v", ents)
	}
}
