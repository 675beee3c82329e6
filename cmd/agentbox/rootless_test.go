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

// rootlessUID is the ordinary user TestRootlessDefaultNetworkNamesFlags
// runs agentbox as.
const rootlessUID = 2001

// TestRootlessDefaultNetworkNamesFlags: the README's first command run by
// an ordinary user, on a host where only root makes the default network,
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
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err == nil && strings.TrimSpace(stdout.String()) == "hi" {
			t.Skip("the default network works without root here: no error to check")
		}
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
