package cli

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestSpawnOptions: spawn takes -e, -w and --timeout, the timeout enforced
// inside the sandbox (the process outlives agentbox).
func TestSpawnOptions(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	if r := h.must("spawn", "-e", "A=1", "--env", "B=two words", "-w", dir, "--", `echo "$A $B"; pwd`); r.stdout != "1\n" {
		t.Fatalf("spawn: %q", r.stdout)
	}
	if r := h.run("logs", "-f", "1"); r.code != 0 || r.stdout != "1 two words\n"+dir+"\n" {
		t.Errorf("logs -f of the process with -e and -w: %v", r)
	}
	start := time.Now()
	r := h.must("spawn", "--timeout", "300ms", "--", "sleep", "30")
	if r.stdout != "2\n" {
		t.Fatalf("spawn --timeout: %q", r.stdout)
	}
	if r := h.run("logs", "-f", "2"); r.code != sandbox.ExitTimedOut {
		t.Errorf("logs -f of a process past its timeout: %v, want exit 124", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the timeout took %v", d)
	}
	var procs []processInfo
	if err := json.Unmarshal([]byte(h.must("ps", "--json").stdout), &procs); err != nil || len(procs) != 2 ||
		procs[1].Command != `timeout -k 10 0.3 "${BASH:-sh}" -c 'sleep 30'` || procs[1].Running || *procs[1].ExitCode != 124 {
		t.Errorf("ps --json: %v %+v", err, procs)
	}
	// A process that ignores SIGTERM is killed 10s later; 0 means no timeout.
	if got := timeoutLine("trap '' TERM; sleep 60", 90*time.Second); got != `timeout -k 10 90 "${BASH:-sh}" -c 'trap '\'''\'' TERM; sleep 60'` {
		t.Errorf("timeoutLine: %s", got)
	}
	h.must("spawn", "--timeout", "0", "--", "true")
	procs = nil
	if err := json.Unmarshal([]byte(h.must("ps", "--json").stdout), &procs); err != nil || len(procs) != 3 || procs[2].Command != "true" {
		t.Errorf("spawn --timeout 0: %v %+v", err, procs)
	}
}

// TestLogsFollow: logs -f prints the output as it comes until the process
// exits, and exits with its code; with --json as a stream of events.
func TestLogsFollow(t *testing.T) {
	h := newHarness(t)
	h.must("spawn", "--", "echo a; echo e >&2; sleep 0.3; echo b; exit 3")
	r := h.run("logs", "-f", "1")
	if r.code != 3 || r.stdout != "a\nb\n" || r.stderr != "e\n" {
		t.Errorf("logs -f: %v, want exit 3, stdout a b, stderr e", r)
	}
	// Again, once it exited, and as JSON.
	r = h.run("logs", "-f", "--json", "1")
	s := parseStream(t, r.stdout)
	if r.code != 3 || string(s.stdout) != "a\nb\n" || string(s.stderr) != "e\n" || s.events[0].Type != "start" ||
		s.events[0].Process != 1 || s.last().Type != "exit" || *s.last().ExitCode != 3 {
		t.Errorf("logs -f --json: %v", r)
	}
	// The process is still known: following does not forget it.
	if r := h.must("ps"); !strings.Contains(r.stdout, "exited (3)") {
		t.Errorf("ps after logs -f: %q", r.stdout)
	}
	if r := h.run("logs", "-f", "7"); r.code != ExitError || !strings.Contains(r.stderr, "no process 7") {
		t.Errorf("logs -f of an unknown process: %v", r)
	}
}

// TestSandboxInfoShowsIdentity: sandbox info states who commands run as,
// the network and the limits.
func TestSandboxInfoShowsIdentity(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--block-network", "true")
	r := h.must("sandbox", "info", DefaultID)
	for _, w := range []string{
		"User:", "agent (uid 0, gid 0: root of the sandbox's own user namespace, capabilities: none), HOME=/home/agent",
		"Host uids:", "100000-165535 (uids 0-65535 inside, unprivileged on the host)",
		"Network:", "blocked (loopback only)",
		"Limits:", "none enforced (none in the fake)",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("info lacks %q: %s", w, r.stdout)
		}
	}
	var info sandbox.Info
	if err := json.Unmarshal([]byte(h.must("sandbox", "info", "--json", DefaultID).stdout), &info); err != nil ||
		info.Identity == nil || info.Identity.User != "agent" || info.Network == nil || info.Network.Mode != sandbox.NetworkBlocked || info.Limits == nil {
		t.Errorf("info --json: %v %+v", err, info)
	}
}

// TestHelpJSON: the JSON shapes and error codes are documented.
func TestHelpJSON(t *testing.T) {
	h := newHarness(t)
	r := h.must("help", "json")
	for _, w := range []string{`{"type":"start"`, `"encoding":"utf-8"`, `"base64"`, `{"type":"exit","exitCode":0,"timedOut":false,"killed":false`,
		KindUsage, KindConfigConflict, KindNotFound, KindStateDir, KindStartFailed, KindSandboxGone, KindOutput, KindInterrupted, KindInternal} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("help json lacks %q", w)
		}
	}
	for _, cmd := range []string{"exec", "logs"} {
		if r := h.must(cmd, "--help"); !strings.Contains(r.stdout, "agentbox help json") {
			t.Errorf("%s --help does not point at 'agentbox help json'", cmd)
		}
	}
}

// TestLogsFollowOutputClosed: logs -f whose output closes ends at once
// with 141, leaving the process running.
func TestLogsFollowOutputClosed(t *testing.T) {
	h := newHarness(t)
	h.must("spawn", "--", "yes")
	start := time.Now()
	code := Run(context.Background(), Config{
		Engine: h.e, Stdout: &brokenWriter{limit: 10, err: syscall.EPIPE}, Getenv: func(string) string { return "" },
	}, []string{"logs", "-f", "1"})
	if code != ExitBrokenPipe {
		t.Errorf("exit %d, want 141", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("logs -f went on for %v after its output closed", d)
	}
	if r := h.must("ps"); !strings.Contains(r.stdout, "running") {
		t.Errorf("the process no longer runs: %q", r.stdout)
	}
}
