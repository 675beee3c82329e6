//go:build linux

package local_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
)

// TestEscapeNestedNamespaces: by default a command can create no user
// namespace, so no nested namespace's root reaches nf_tables; with
// Confinement.AllowNestedNamespaces it can (the proof that the probe
// works), tools such as unshare -r and bwrap work, and what it creates
// stays in the nested namespace, while the init stays out of reach.
func TestEscapeNestedNamespaces(t *testing.T) {
	table := fmt.Sprintf("agentbox_escape_%d", os.Getpid())
	sb := newProbeSandbox(t, local.Confinement{})
	nested := newProbeSandbox(t, local.Confinement{AllowNestedNamespaces: true})

	t.Run("nf_tables", func(t *testing.T) {
		if got := runProbe(t, sb, "nft_nested", table); got != "EPERM" {
			t.Errorf("nf_tables in a nested user+net namespace: %q, want EPERM", got)
		}
		if got := runProbe(t, nested, "nft_nested", table); got != "ok" {
			t.Fatalf("with AllowNestedNamespaces, nf_tables in a nested user+net namespace: %q, want ok", got)
		}
		if os.Geteuid() != 0 {
			t.Log("not root: the network namespaces of the host and of the sandbox are not checked")
			return
		}
		// The table went with the nested namespace: it is neither in the
		// sandbox's network namespace nor in the host's.
		for _, pid := range []int{local.InitPID(nested), os.Getpid()} {
			tables, err := tablesOf(pid)
			if err != nil {
				t.Fatalf("nf_tables of pid %d's network namespace: %v", pid, err)
			}
			if slices.Contains(tables, table) {
				t.Errorf("table %s appeared in the network namespace of pid %d", table, pid)
			}
		}
	})
	t.Run("capabilities", func(t *testing.T) {
		// CAP_SETFCAP (31), which mapping root into a nested user
		// namespace needs, added to the default set (Docker's with the
		// writable root root gives, which holds it, or none).
		const caps = "grep -E '^Cap(Prm|Eff|Bnd):' /proc/self/status | cut -f2 | sort -u"
		wantNested := "0000000080000000"
		if os.Geteuid() == 0 {
			wantNested = dockerCapMask
		}
		if got := strings.TrimSpace(mustRun(t, nested, caps)); got != wantNested {
			t.Errorf("capabilities with AllowNestedNamespaces: %q, want %s", got, wantNested)
		}
		if got := strings.TrimSpace(mustRun(t, sb, caps)); got != defaultCapMask() {
			t.Errorf("capabilities by default: %q, want %s", got, defaultCapMask())
		}
	})
	t.Run("unshare-mount", func(t *testing.T) {
		const cmd = "unshare -Urm sh -c 'mount -t tmpfs agentbox-nested /tmp && grep -c agentbox-nested /proc/self/mountinfo'"
		if r := run(t, sb, cmd); r.ExitCode == 0 || !strings.Contains(r.Stderr, "Operation not permitted") {
			t.Errorf("unshare -Urm by default: exit %d, %q, want Operation not permitted", r.ExitCode, r.Stderr)
		}
		if out := mustRun(t, nested, cmd); strings.TrimSpace(out) != "1" {
			t.Errorf("with AllowNestedNamespaces, a tmpfs in a nested mount namespace: %q", out)
		}
		// The mount stayed in the nested namespace.
		if out := mustRun(t, nested, "grep -c agentbox-nested /proc/self/mountinfo || true"); strings.TrimSpace(out) != "0" {
			t.Errorf("the nested mount leaked into the sandbox: %q", out)
		}
	})
	t.Run("bwrap", func(t *testing.T) {
		_, err := exec.LookPath("bwrap")
		testenv.Need(t, err == nil, "bwrap is not installed (Debian package bubblewrap)")
		const cmd = "bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev -- /bin/sh -c 'echo $$; readlink /proc/self/ns/pid'"
		if r := run(t, sb, cmd); r.ExitCode == 0 {
			t.Errorf("bwrap ran by default: %q", r.Stdout)
		}
		// The shell runs in a PID namespace of its own, as PID 2 (after
		// bwrap's init), with a /proc of its own.
		own := strings.TrimSpace(mustRun(t, nested, "readlink /proc/self/ns/pid"))
		f := strings.Fields(mustRun(t, nested, cmd))
		if len(f) != 2 || f[0] != "2" || f[1] == own {
			t.Errorf("with AllowNestedNamespaces, bwrap: %q, want pid 2 in a PID namespace other than %s", f, own)
		}
	})
	t.Run("nested-root-cannot-reach-init", func(t *testing.T) {
		// Root of a nested user namespace holds every capability there,
		// none in the sandbox's: the init stays out of reach.
		want := map[string]string{"ptrace_init": "EPERM", "environ_init": "EACCES", "mem_init": "EACCES", "fd_links_init": "EACCES", "keyctl": "EPERM"}
		if kernelLandlockABI() >= 6 {
			want["kill_init"] = "EPERM"
		}
		var names []string
		for n := range want {
			names = append(names, n)
		}
		got := parseProbes(mustRun(t, nested, "unshare -Ur "+probeScript(names)))
		for n, w := range want {
			if got[n] != w {
				t.Errorf("%s as root of a nested user namespace: %q, want %s", n, got[n], w)
			}
		}
	})
}

// tablesOf lists the nf_tables tables of pid's network namespace, from a
// thread that enters it and then ends with its goroutine.
func tablesOf(pid int) ([]string, error) {
	// On a thread of its own that ends with it (never the main thread,
	// which would stay in the namespace, and /proc/self with it).
	var tables []string
	err := onThread(func() error {
		fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return err
		}
		tables, err = nftTables()
		return err
	})
	return tables, err
}

// TestEscapeProcKeys: /proc/keys and /proc/key-users show a sandbox no key
// of the host, nor of a neighbour sandbox (which, as root, has host ids
// of its own anyway: escape_identity_test.go).
func TestEscapeProcKeys(t *testing.T) {
	testenv.NeedRoot(t, "needs root: the neighbour's key is checked as its host uid")
	hostKey := fmt.Sprintf("agentbox-escape-host-%d", os.Getpid())
	id, err := unix.AddKey("user", hostKey, []byte("host secret"), unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		t.Fatalf("add a host key: %v", err)
	}
	defer unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
	if keys, _ := os.ReadFile("/proc/keys"); !strings.Contains(string(keys), hostKey) {
		t.Fatalf("control: the host's /proc/keys does not show %s", hostKey)
	}

	// A neighbour that may use keys (unconfined) stores one in its user
	// keyring; its host uid sees it in /proc/keys.
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	neighbour := newSandbox(t, local.Options{StateDir: stateDir, Config: probeConfig(local.Confinement{Unconfined: true})})
	neighbourKey := fmt.Sprintf("agentbox-escape-neighbour-%d", os.Getpid())
	if got := runProbe(t, neighbour, "add_user_key", neighbourKey); got != "ok" {
		t.Fatalf("the unconfined neighbour adding a key: %q", got)
	}
	uid := mustRun(t, neighbour, "cat /proc/self/uid_map")
	f := strings.Fields(uid)
	if len(f) < 2 {
		t.Fatalf("uid_map %q", uid)
	}
	out, err := exec.Command("setpriv", "--reuid="+f[1], "--regid="+f[1], "--clear-groups", "cat", "/proc/keys").CombinedOutput()
	if err != nil || !strings.Contains(string(out), neighbourKey) {
		t.Fatalf("control: host uid %s does not see the neighbour's key in /proc/keys: %v %q", f[1], err, out)
	}

	sb := newSandbox(t, local.Options{StateDir: stateDir})
	for _, file := range []string{"/proc/keys", "/proc/key-users"} {
		if got := mustRun(t, sb, "cat "+file); got != "" {
			t.Errorf("%s inside: %q, want nothing", file, got)
		}
	}
	if got := runProbe(t, neighbour, "add_user_key", neighbourKey+"-2"); got != "ok" {
		t.Errorf("the neighbour's keys stopped working: %q", got)
	}
}
