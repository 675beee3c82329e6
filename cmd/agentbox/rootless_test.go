//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestREADMEFirstCommandRootless runs the README's first command, with the
// built binary, as an ordinary user (uid 2001) with a fresh HOME: the
// sandbox "default" is made on first use with every default, the default
// network included (the user-mode network without root), and the
// command's output comes back.
func TestREADMEFirstCommandRootless(t *testing.T) {
	testenv.NeedRoot(t, "needs root to run the command as another uid (as an ordinary user, TestBinaryEndToEnd is this case)")
	bin := agentboxBinary(t)
	// The built binary's folder is the test's (mode 0700): let uid 2001 in.
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp("", "agentbox-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chown(home, 2001, 2001); err != nil {
		t.Fatal(err)
	}
	as2001 := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 2001, Gid: 2001, Groups: []uint32{}}}
		return cmd
	}
	t.Cleanup(func() {
		if out, err := as2001("sandbox", "rm", "default").CombinedOutput(); err != nil {
			t.Errorf("sandbox rm default: %v\n%s", err, out)
		}
	})
	// The README's first command, less "go run ./cmd/agentbox".
	cmd := as2001("exec", "--", "sh", "-c", `echo "hello from $(hostname), pid $$"; id; ls /`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := testenv.StartUnprivileged(t, nil, cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agentbox exec as uid 2001: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "hello from default, pid ") || !strings.Contains(stdout.String(), "uid=") {
		t.Errorf("agentbox exec as uid 2001: stdout %q, want the hello line and id's\nstderr: %s", stdout.String(), stderr.String())
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "state", "agentbox")); err != nil {
		t.Errorf("the state folder is not in the fresh HOME: %v", err)
	}
}

// rootlessUID is the ordinary user TestRootlessDefaultNetworkNamesFlags
// runs agentbox as.
const rootlessUID = 2001

// TestRootlessDefaultNetworkNamesFlags: the README's first command run by
// an ordinary user, on a host without a /dev/net/tun the user may open
// (testenv.StartWithoutTUN), where only root makes the default network,
// fails saying what works without root with the CLI's flags, not the
// library's fields (which local's error names: see local's
// TestNetworkNeedsRootErrorNamesFields). Root runs the binary as another
// uid, with a fresh HOME and state dir.
func TestRootlessDefaultNetworkNamesFlags(t *testing.T) {
	testenv.NeedRoot(t, "needs root: to run agentbox as an ordinary user")
	setpriv := testenv.NeedTool(t, "setpriv", "util-linux")
	bin := agentboxBinary(t)
	dir, err := os.MkdirTemp("", "agentbox-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	for _, step := range []error{
		os.Chmod(dir, 0o755), os.Mkdir(home, 0o700), os.Chown(home, rootlessUID, rootlessUID),
		copyFile(bin, filepath.Join(dir, "agentbox"), 0o755),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	cmd := exec.Command(setpriv, "--reuid", "2001", "--regid", "2001", "--clear-groups",
		filepath.Join(dir, "agentbox"), "exec", "--", "sh", "-c", "echo hi")
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", cli.StateDirEnv + "=" + filepath.Join(home, "state")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := testenv.StartWithoutTUN(t, cmd); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("agentbox exec as uid %d: %v (stderr %q)", rootlessUID, err, stderr.String())
	}
	msg := stderr.String()
	if code := ee.Sys().(syscall.WaitStatus).ExitStatus(); code != cli.ExitExecFailed || !strings.Contains(msg, "needs root") {
		t.Fatalf("agentbox exec as uid %d: exit %d, %q; want exit %d saying the default network needs root", rootlessUID, code, msg, cli.ExitExecFailed)
	}
	for _, s := range []string{"(--block-network)", "--allow-domain"} {
		if !strings.Contains(msg, s) {
			t.Errorf("the error %q does not name %s", msg, s)
		}
	}
	for _, field := range []string{"Network.Mode blocked", "Network.Domains", "NetworkBlockAll", "DomainAllowList"} {
		if strings.Contains(msg, field) {
			t.Errorf("the error %q names the library's %s", msg, field)
		}
	}
}

// copyFile copies the file src to dst, with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, perm)
}
