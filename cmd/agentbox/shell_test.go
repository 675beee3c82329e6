package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// tmux drives a private tmux server (its own socket, no configuration).
type tmux struct {
	t    *testing.T
	sock string
}

// newTmux starts a tmux server running command in a detached 80×24
// session "s"; it is killed when the test ends. Without tmux the test is
// skipped, or fails under AGENTBOX_REQUIRE_ALL=1 (see testenv.NeedTool).
func newTmux(t *testing.T, command string) *tmux {
	t.Helper()
	testenv.NeedTool(t, "tmux", "tmux")
	m := &tmux{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	m.run("-f", "/dev/null", "new-session", "-d", "-s", "s", "-x", "80", "-y", "24", command)
	t.Cleanup(func() { _ = m.cmd("kill-server").Run() })
	return m
}

func (m *tmux) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command("tmux", append([]string{"-S", m.sock}, args...)...)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	return cmd
}

func (m *tmux) run(args ...string) string {
	m.t.Helper()
	out, err := m.cmd(args...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys types keys into the session (tmux key names, such as Enter, C-c).
func (m *tmux) keys(keys ...string) {
	m.t.Helper()
	m.run(append([]string{"send-keys", "-t", "s"}, keys...)...)
}

// waitPane waits until the visible pane matches re.
func (m *tmux) waitPane(re string) {
	m.t.Helper()
	if pane, ok := m.paneMatches(re, 60*time.Second); !ok {
		m.t.Fatalf("the pane never matched %q:\n%s", re, pane)
	}
}

// paneMatches polls the visible pane until it matches re or wait passed.
func (m *tmux) paneMatches(re string, wait time.Duration) (string, bool) {
	m.t.Helper()
	rx := regexp.MustCompile(re)
	var pane string
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		pane = m.run("capture-pane", "-p", "-t", "s")
		if rx.MatchString(pane) {
			return pane, true
		}
	}
	return pane, false
}

// TestShellTmux drives `agentbox shell` in a real terminal (tmux) against a
// local sandbox: the prompt, a command's output, a window resize seen by
// `stty size`, Ctrl-C interrupting a job in the sandbox (not agentbox),
// and `exit 3` making agentbox exit 3.
func TestShellTmux(t *testing.T) {
	e := newEnv(t)
	bin := agentboxBinary(t)
	codeFile := filepath.Join(t.TempDir(), "code")
	m := newTmux(t, "env "+sandbox.ShellQuote("AGENTBOX_STATE_DIR="+e.stateDir)+" "+sandbox.ShellQuote(bin)+" shell; echo $? > "+sandbox.ShellQuote(codeFile))

	m.waitPane(`(?m)[$#]$`) // the sandbox shell's prompt (capture-pane drops trailing blanks)
	m.keys("echo $((40+2))-ok; stty size", "Enter")
	m.waitPane(`(?m)^42-ok\s+24 80\s`)

	// agentbox passes the new size on when SIGWINCH tells it, which may
	// be after the next command started: ask until the sandbox sees it.
	m.run("resize-window", "-t", "s", "-x", "100", "-y", "30")
	resized := false
	for i := 0; i < 30 && !resized; i++ {
		m.keys("stty size", "Enter")
		_, resized = m.paneMatches(`(?m)^30 100\s`, 2*time.Second)
	}
	if !resized {
		m.waitPane(`(?m)^30 100\s`) // fails, showing the pane
	}

	// The job prints once it runs in the foreground, so that Ctrl-C
	// cannot come before it.
	m.keys("sh -c 'echo sleeping-$((1+1)); exec sleep 100'", "Enter")
	m.waitPane(`(?m)^sleeping-2\s`)
	m.keys("C-c")
	m.keys("echo back-$((3+4))", "Enter")
	m.waitPane(`(?m)^back-7\s`)

	m.keys("exit 3", "Enter")
	waitFor(t, "agentbox to exit", func() bool {
		b, _ := os.ReadFile(codeFile)
		return strings.HasSuffix(string(b), "\n")
	})
	if b, _ := os.ReadFile(codeFile); string(b) != "3\n" {
		t.Fatalf("agentbox exited %q, want 3", b)
	}
}

// TestShellCommandTmux: `agentbox shell --id ID -- CMD` runs CMD (not a
// login shell) on a terminal in sandbox ID and exits with its exit code.
func TestShellCommandTmux(t *testing.T) {
	e := newEnv(t)
	bin := agentboxBinary(t)
	codeFile := filepath.Join(t.TempDir(), "code")
	newTmux(t, "env "+sandbox.ShellQuote("AGENTBOX_STATE_DIR="+e.stateDir)+" "+sandbox.ShellQuote(bin)+
		` shell --id other -- sh -c 'test -t 0 && test -t 1 && echo "$$" > /tmp/on-a-tty; exit 5'; echo $? > `+sandbox.ShellQuote(codeFile))
	waitFor(t, "agentbox to exit", func() bool {
		b, _ := os.ReadFile(codeFile)
		return strings.HasSuffix(string(b), "\n")
	})
	if b, _ := os.ReadFile(codeFile); string(b) != "5\n" {
		t.Fatalf("agentbox exited %q, want 5", b)
	}
	if r := e.run("", "exec", "--id", "other", "--", "cat", "/tmp/on-a-tty"); r.code != 0 || strings.TrimSpace(r.stdout) == "" {
		t.Fatalf("the command did not run on a terminal in sandbox other: %+v", r)
	}
	if r := e.must("sandbox", "ls"); strings.Contains(r.stdout, "default") {
		t.Fatalf("shell --id other made the default sandbox:\n%s", r.stdout)
	}
}

// TestShellNotATerminal: without a terminal on standard input, agentbox
// shell says what to do instead and exits 2, before touching a sandbox.
func TestShellNotATerminal(t *testing.T) {
	e := newEnv(t)
	r := e.run("echo hi\n", "shell")
	if r.code != 2 || !strings.Contains(r.stderr, "needs a terminal") || !strings.Contains(r.stderr, "agentbox exec -i") {
		t.Fatalf("shell without a terminal: %+v", r)
	}
	if r := e.must("sandbox", "ls"); strings.Contains(r.stdout, "default") {
		t.Fatalf("a sandbox was created: %s", r.stdout)
	}
}
