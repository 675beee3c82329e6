package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// events is a parsed `--json` stream of exec or logs -f.
type events struct {
	list           []map[string]any
	stdout, stderr []byte
}

func (s events) last() map[string]any { return s.list[len(s.list)-1] }

// parseEvents decodes the JSON lines of out, joining the bytes of the
// output chunks.
func parseEvents(t testing.TB, out string) events {
	t.Helper()
	var s events
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e map[string]any
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("not a JSON stream: %v: %q", err, out)
		}
		s.list = append(s.list, e)
		data, _ := e["data"].(string)
		b := []byte(data)
		if e["encoding"] == "base64" {
			var err error
			if b, err = base64.StdEncoding.DecodeString(data); err != nil {
				t.Fatal(err)
			}
		}
		if e["type"] == "stdout" {
			s.stdout = append(s.stdout, b...)
		} else if e["type"] == "stderr" {
			s.stderr = append(s.stderr, b...)
		}
	}
	if len(s.list) == 0 {
		t.Fatalf("empty stream")
	}
	return s
}

// homeFile returns a host path of a file in the home of sandbox id: in
// its state folder or, when the home is on the sandbox's disk image
// (mounted in its mount namespace only), through its running init's root.
func (e *env) homeFile(id, name string) string {
	dir := filepath.Join(e.stateDir, "sandboxes", id)
	if _, err := os.Stat(filepath.Join(dir, "disk.img")); err != nil {
		return filepath.Join(dir, "home", name)
	}
	var m struct {
		Init struct {
			PID int `json:"pid"`
		} `json:"init"`
		Options struct {
			User string `json:"user"`
		} `json:"options"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "meta.json")); err != nil || json.Unmarshal(b, &m) != nil {
		return filepath.Join(dir, "home", name)
	}
	return fmt.Sprintf("/proc/%d/root/home/%s/%s", m.Init.PID, m.Options.User, name)
}

// waitFor waits until cond holds, failing the test after 15s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestBlockNetworkOnExistingLocal: --block-network on a running sandbox
// made with network access blocks it live (its interface goes), then runs
// the command; 'sandbox network --default' gives the network back; a
// sandbox made blocked is blocked.
func TestBlockNetworkOnExistingLocal(t *testing.T) {
	e := newEnv(t)
	const ifaces = "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"
	if os.Geteuid() == 0 {
		if r := e.must("exec", "--", ifaces); r.stdout != "eth0 lo " {
			t.Errorf("interfaces of a default sandbox: %q", r.stdout)
		}
	} else {
		e.must("exec", "--block-network", "true") // without root the default network is not available
	}
	r := e.must("exec", "--block-network", "--", ifaces)
	if r.stdout != "lo " || (os.Geteuid() == 0 && !strings.Contains(r.stderr, "network blocked")) {
		t.Errorf("--block-network on an existing sandbox: %+v, want lo only and a notice", r)
	}
	if r := e.must("sandbox", "info", "default"); !strings.Contains(r.stdout, "blocked (loopback only)") {
		t.Errorf("info after --block-network: %s", r.stdout)
	}
	if os.Geteuid() == 0 {
		if r := e.must("sandbox", "network", "default", "--default"); !strings.Contains(r.stdout, "public internet only") {
			t.Errorf("network --default: %s", r.stdout)
		}
		if r := e.must("exec", "--", ifaces); r.stdout != "eth0 lo " {
			t.Errorf("interfaces after network --default: %q", r.stdout)
		}
	}
	e.must("exec", "--block-network", "--id", "closed", "true")
	if r := e.must("exec", "--block-network", "--id", "closed", "--", ifaces); r.stdout != "lo " {
		t.Errorf("interfaces of a blocked sandbox: %q", r.stdout)
	}
	if r := e.must("sandbox", "info", "closed"); !strings.Contains(r.stdout, "blocked (loopback only)") {
		t.Errorf("info of a blocked sandbox: %s", r.stdout)
	}
}

// TestSandboxGoneLocal: stopping or removing a sandbox while exec runs a
// command ends exec with 137 and says so, streamed or not.
func TestSandboxGoneLocal(t *testing.T) {
	for _, tt := range []struct {
		verb, past string
		json       bool
	}{{"stop", "stopped", false}, {"rm", "removed", false}, {"stop", "stopped", true}, {"rm", "removed", true}} {
		t.Run(fmt.Sprintf("%s json=%v", tt.verb, tt.json), func(t *testing.T) {
			e := newEnv(t)
			e.must("exec", "true")
			args := []string{"exec", "--", "touch ~/started; exec sleep 60"}
			if tt.json {
				args = append([]string{"--json"}, args...)
			}
			done := make(chan result, 1)
			go func() { done <- e.run("", args...) }()
			waitFor(t, "the command to start", func() bool { return exists(e.homeFile(cli.DefaultID, "started")) })
			e.must("sandbox", tt.verb, cli.DefaultID)
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("exec did not return")
			}
			msg := r.stderr
			if tt.json {
				last := parseEvents(t, r.stdout).last()
				if last["type"] != "error" || last["code"] != cli.KindSandboxGone || last["exitCode"] != float64(cli.ExitSandboxGone) {
					t.Errorf("last event %v", last)
				}
				msg, _ = last["message"].(string)
			}
			want := fmt.Sprintf("sandbox %q was %s while the command ran", cli.DefaultID, tt.past)
			if r.code != cli.ExitSandboxGone || !strings.Contains(msg, want) || strings.Contains(msg, "connection refused") {
				t.Errorf("got %+v, want exit 137 saying %q", r, want)
			}
		})
	}
}

// TestBinarySIGTERM: SIGTERM to agentbox exec exits 143 and kills the
// command in the sandbox.
func TestBinarySIGTERM(t *testing.T) {
	e := newEnv(t)
	cmd := binaryCommand(t, e.stateDir, "exec", "--", "sh", "-c", "echo started; exec sleep 61")
	_, stderr := startOutputting(t, cmd)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, "after SIGTERM")
	if code := cmd.ProcessState.ExitCode(); code != cli.ExitTerminated || !strings.Contains(stderr.String(), "terminated") {
		t.Errorf("exit code %d, stderr %q; want 143, terminated", code, stderr.String())
	}
	if n := e.count("sleep 61"); n != 0 {
		t.Errorf("the command still runs in the sandbox (%d processes)", n)
	}
}

// TestExecJSONLocal: exec --json streams events whose chunks carry the
// output's exact bytes.
func TestExecJSONLocal(t *testing.T) {
	e := newEnv(t)
	r := e.run("", "exec", "--json", "--", `printf '\377\000caf\303\251'; head -c 300000 /dev/zero | tr '\0' x; echo oops >&2; exit 5`)
	s := parseEvents(t, r.stdout)
	want := "\xff\x00caf\u00e9" + strings.Repeat("x", 300000)
	if r.code != 5 || string(s.stdout) != want || string(s.stderr) != "oops\n" || r.stderr != "" {
		t.Errorf("exit %d, stdout %d bytes (%q…), stderr %q, agentbox's stderr %q", r.code, len(s.stdout), s.stdout[:min(20, len(s.stdout))], s.stderr, r.stderr)
	}
	if first, last := s.list[0], s.last(); first["type"] != "start" || first["sandbox"] != cli.DefaultID ||
		last["type"] != "exit" || last["exitCode"] != float64(5) || last["timedOut"] != false {
		t.Errorf("first %v, last %v", first, last)
	}
}

// TestSpawnTimeoutLocal: spawn -e/-w/--timeout, the timeout enforced in
// the sandbox after agentbox exited; logs -f follows to the exit code.
func TestSpawnTimeoutLocal(t *testing.T) {
	e := newEnv(t)
	if r := e.must("spawn", "-e", "X=y", "-w", "/tmp", "--timeout", "500ms", "--", `echo "$X $(pwd)"; exec sleep 30`); r.stdout != "1\n" {
		t.Fatalf("spawn: %q", r.stdout)
	}
	start := time.Now()
	r := e.run("", "logs", "-f", "1")
	if r.code != sandbox.ExitTimedOut || r.stdout != "y /tmp\n" {
		t.Errorf("logs -f: %+v, want exit 124 and the output", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the timeout took %v", d)
	}
	if n := e.count("sleep 30"); n != 0 {
		t.Errorf("the timed-out process still runs (%d)", n)
	}
}

// TestSandboxInfoLocal: sandbox info tells the truth about the identity,
// network and limits.
func TestSandboxInfoLocal(t *testing.T) {
	e := newEnv(t)
	uid := e.must("exec", "--", "id -u; cat /proc/self/uid_map").stdout
	r := e.must("sandbox", "info", cli.DefaultID)
	hostUIDs := fmt.Sprintf("%d (uid 0 inside; the sandbox has no other)", os.Geteuid())
	limits := "none enforced (no CPU, memory, process-count or disk limit"
	caps := "capabilities: none"
	if os.Geteuid() == 0 {
		// As root, the root is writable, with Docker's capabilities.
		caps = "capabilities: CAP_CHOWN,"
		// The sandbox's own range, as its uid_map says ("0 first 65536").
		var first int
		if f := strings.Fields(uid); len(f) == 4 {
			first, _ = strconv.Atoi(f[2])
		}
		hostUIDs = fmt.Sprintf("%d-%d (uids 0-65535 inside, unprivileged on the host)", first, first+65535)
		limits = "1024 processes"
	}
	for _, w := range []string{"User:", "agent (uid 0, gid 0: root of the sandbox's own user namespace, " + caps, "HOME=/home/agent",
		"Host uids:", hostUIDs, "Network:", "the public internet only", "Limits:", limits} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("info lacks %q: %s", w, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "user=agent") || !strings.HasPrefix(uid, "0\n") {
		t.Errorf("info: %s; inside: %q", r.stdout, uid)
	}
}

// TestUnsafeStateDirLocal: a state dir other users may write is refused,
// saying why and what to do.
func TestUnsafeStateDirLocal(t *testing.T) {
	e := newEnv(t)
	if err := os.Chmod(e.stateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(e.stateDir, 0o700)
	for _, tt := range []struct {
		args []string
		code int
	}{{[]string{"exec", "true"}, cli.ExitExecFailed}, {[]string{"sandbox", "ls"}, cli.ExitError}, {[]string{"spawn", "true"}, cli.ExitError}} {
		r := e.run("", tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, e.stateDir+" is writable by group or others (mode 0777)") ||
			!strings.Contains(r.stderr, "pass --state-dir DIR or set "+cli.StateDirEnv) {
			t.Errorf("%v: %+v, want exit %d saying the state dir is unsafe", tt.args, r, tt.code)
		}
	}
	if exists(filepath.Join(e.stateDir, "sandboxes")) {
		t.Error("a sandbox folder was made in an unsafe state dir")
	}
}

// TestDefaultStateDirLocal: without HOME and the XDG variables there is no
// default state dir (never /tmp); XDG_RUNTIME_DIR is the last fallback;
// the help says so.
func TestDefaultStateDirLocal(t *testing.T) {
	run := func(env []string, args ...string) result {
		cmd := exec.Command(agentboxBinary(t), args...)
		cmd.Env = append(env, "PATH="+os.Getenv("PATH"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	}
	r := run(nil, "sandbox", "ls")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "set AGENTBOX_STATE_DIR") || !strings.Contains(r.stderr, "--state-dir") {
		t.Errorf("without HOME: %+v, want exit 1 telling to set AGENTBOX_STATE_DIR", r)
	}
	runtime := t.TempDir()
	if r := run([]string{"XDG_RUNTIME_DIR=" + runtime}, "--json", "sandbox", "ls"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("with XDG_RUNTIME_DIR: %+v", r)
	}
	if r := run(nil, "help", "json"); r.code != 0 || !strings.Contains(r.stdout, `"code"`) {
		t.Errorf("help json without a state dir: %+v", r)
	}
	r = run(nil, "--help")
	for _, w := range []string{"$AGENTBOX_STATE_DIR", "$XDG_STATE_HOME/agentbox", "~/.local/state/agentbox", "$XDG_RUNTIME_DIR/agentbox"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("--help lacks %q: %s", w, r.stdout)
		}
	}
}

// BenchmarkExecJSON100MiB measures `agentbox exec --json` (a new agentbox
// process) printing 100 MiB of text and of binary output, against os/exec
// of the same command read from a pipe, in the same run. It reports both
// throughputs, their ratio, and the peak RSS of the agentbox process
// (rusage of the child): memory must not grow with the output.
func BenchmarkExecJSON100MiB(b *testing.B) {
	for _, tt := range []struct{ name, command string }{
		{"text", "yes 'agentbox json benchmark line' | head -c 104857600"},
		{"binary", "head -c 104857600 /dev/urandom"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			e := newEnv(b)
			if r := runBinary(b, e.stateDir, "exec", "true"); r.code != 0 {
				b.Fatalf("warm-up: %+v", r)
			}
			var base, ours time.Duration
			var maxRSS int64
			for b.Loop() {
				t0 := time.Now()
				if n := pipeCount(b, exec.Command("sh", "-c", tt.command)); n != 100<<20 {
					b.Fatalf("os/exec read %d bytes", n)
				}
				t1 := time.Now()
				cmd := binaryCommand(b, e.stateDir, "exec", "--json", "--", tt.command)
				pipeCount(b, cmd)
				ours += time.Since(t1)
				base += t1.Sub(t0)
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					maxRSS = max(maxRSS, ru.Maxrss)
				}
			}
			mib := float64(100 * b.N)
			b.ReportMetric(mib/base.Seconds(), "os/exec-MiB/s")
			b.ReportMetric(mib/ours.Seconds(), "agentbox-MiB/s")
			b.ReportMetric(base.Seconds()/ours.Seconds(), "ratio")
			b.ReportMetric(float64(maxRSS)/1024, "peak-RSS-MiB")
		})
	}
}

// pipeCount runs cmd, reading its stdout to the end, and returns how many
// bytes it printed.
func pipeCount(b *testing.B, cmd *exec.Cmd) int64 {
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, out)
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%v: %v", cmd.Args, err)
	}
	return n
}

// TestGitCloneLocal: agentbox git clone in a local sandbox, from a
// repository inside it (the host's loopback is out of its reach), made
// with the git the sandbox sees in the host's /usr. The clone itself is
// the init's (go-git), which needs no git binary.
func TestGitCloneLocal(t *testing.T) {
	testenv.NeedTool(t, "git", "git") // it prepares the test repository
	e := newEnv(t)
	e.must("exec", "--", "sh", "-c", `mkdir src && cd src && git init -q -b main && echo hi > f.txt && git add f.txt &&
		git -c user.name=Ann -c user.email=ann@example.com commit -qm one`)
	if r := e.must("git", "clone", "src", "dst"); r.stdout != "cloned src into dst\n" {
		t.Fatalf("git clone: %+v", r)
	}
	if r := e.must("exec", "--", "cat", "dst/f.txt"); r.stdout != "hi\n" {
		t.Fatalf("the cloned file: %+v", r)
	}
	r := e.run("", "git", "clone", "/nonexistent/repo", "gone")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "GIT_REPO_NOT_FOUND") {
		t.Fatalf("clone of a missing repository: %+v", r)
	}
	if r := e.run("", "exec", "--", "test", "-e", "gone"); r.code != 1 {
		t.Fatalf("a failed clone left its folder: %+v", r)
	}
}

// TestExecRootFlags: as root a new sandbox's system folders are writable
// (its own overlay); --read-only-root makes them read-only; --allow-fuse
// gives the sandbox /dev/fuse; asking an existing sandbox for another root
// is refused, saying which setting differs.
func TestExecRootFlags(t *testing.T) {
	testenv.NeedRoot(t, "needs root: a writable root and FUSE need it")
	e := newEnv(t)
	const probe = "/usr/agentbox-exec-flag-probe"
	e.must("exec", "--id", "rw", "--", "touch "+probe)
	if exists(probe) {
		os.Remove(probe)
		t.Fatalf("a sandbox's write into its /usr reached the host")
	}
	r := e.run("", "exec", "--id", "ro", "--read-only-root", "--", "touch "+probe)
	if r.code == 0 || !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("touch in /usr of a --read-only-root sandbox: %+v, want a read-only file system", r)
	}
	r = e.run("", "exec", "--id", "rw", "--read-only-root", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "ReadOnlyRoot") {
		t.Errorf("--read-only-root on a sandbox made without: %+v, want a refusal naming ReadOnlyRoot", r)
	}
	if r := e.run("", "exec", "--id", "rw", "--", "test -e /dev/fuse"); r.code != 1 {
		t.Errorf("/dev/fuse in a sandbox without --allow-fuse: %+v", r)
	}
	if !local.FUSEAvailable() {
		t.Log("no /dev/fuse on this host: --allow-fuse not checked")
		return
	}
	e.must("exec", "--id", "fuse", "--allow-fuse", "--", "test -c /dev/fuse")
}
