//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
