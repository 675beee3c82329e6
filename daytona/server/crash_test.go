package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// The crash test: clients take sandboxes through every transition while
// serve is killed with SIGKILL at random points and restarted on the same
// state dir. AGENTBOX_CRASH_SEED replays a run (the seed is logged).

const (
	crashClients   = 8
	crashPerWorker = 2
	crashKills     = 5
	maxCrashKills  = 12
	settleBound    = 60 * time.Second
)

// crashRun is the serve process of a crash test, replaced at every kill.
type crashRun struct {
	t      *testing.T
	dir    string
	client *http.Client
	mu     sync.Mutex
	serve  *serveProcess
	// ended is set when the test is ending, perhaps early on a failure
	// of its own goroutine: the workers stop at their next request
	// rather than outlive the test.
	ended atomic.Bool
	dump  sync.Once // of the serve's goroutines, at the first stuck sandbox
}

func (c *crashRun) url() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serve.url
}

// call sends one request to the current serve and decodes a 200's body
// into out; it returns the status, or 0 when serve did not answer.
func (c *crashRun) call(method, path string, body, out any) int {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	if !strings.HasPrefix(path, "/toolbox/") {
		path = "/api" + path
	}
	req, err := http.NewRequest(method, c.url()+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0
		}
	}
	return resp.StatusCode
}

// retry calls until serve answers with a status other than 0 or 5xx, up
// to the settle bound, and returns that status.
func (c *crashRun) retry(method, path string, body, out any) int {
	deadline := time.Now().Add(settleBound)
	for {
		st := c.call(method, path, body, out)
		if st != 0 && st < 500 || time.Now().After(deadline) || c.ended.Load() {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle brings sandbox id to state want (started, stopped, or "gone"),
// asking for it with action when it is at rest in another state; it fails
// the test when the sandbox does not get there within the bound.
func (c *crashRun) settle(id, want, action string) apiSandbox {
	deadline := time.Now().Add(settleBound)
	var sb apiSandbox
	for {
		st := c.call("GET", "/sandbox/"+id, nil, &sb)
		switch {
		case want == "gone" && st == http.StatusNotFound, st == http.StatusOK && sb.State == want:
			return sb
		case st == http.StatusOK && (sb.State == stateStarted || sb.State == stateStopped || sb.State == stateError):
			if action != "" {
				method := "POST"
				if action == "delete" {
					method = "DELETE"
				}
				p := "/sandbox/" + id
				if method == "POST" {
					p += "/" + action
				}
				c.call(method, p, nil, nil)
			}
		}
		if c.ended.Load() {
			return sb
		}
		if time.Now().After(deadline) {
			c.errorf("sandbox %s stuck: state %q (error %q), want %q", id, sb.State, sb.ErrorReason, want)
			c.dump.Do(c.dumpServe)
			return sb
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exec runs command in sandbox id through serve's toolbox proxy, retried
// across kills, and returns its output; ok is false when it never ran.
func (c *crashRun) exec(id, command string) (string, bool) {
	var res struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	deadline := time.Now().Add(settleBound)
	for time.Now().Before(deadline) && !c.ended.Load() {
		res.ExitCode, res.Result = -1, ""
		if st := c.call("POST", "/toolbox/"+id+"/process/execute", map[string]string{"command": command}, &res); st == http.StatusOK && res.ExitCode == 0 {
			return res.Result, true
		}
		c.settle(id, stateStarted, "start")
	}
	return "", false
}

// errorf fails the test unless it is ending: a worker that sees the
// test end leaves without a word, since the test's own goroutine has
// already said why.
func (c *crashRun) errorf(format string, args ...any) {
	if !c.ended.Load() {
		c.t.Errorf(format, args...)
	}
}

// dumpServe ends serve with SIGQUIT, which makes it print its
// goroutines, logs those of agentbox's code (where a stuck operation
// waits), and starts a new serve in its place.
func (c *crashRun) dumpServe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.serve
	if p.cmd.Process.Signal(syscall.SIGQUIT) != nil {
		return
	}
	<-p.exited
	var ours []string
	for _, g := range strings.Split(p.stderr.String(), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && strings.Contains(g, "agentbox-dev/agentbox/") {
			ours = append(ours, g)
		}
	}
	c.t.Logf("serve's goroutines in agentbox's code at the first stuck sandbox:\n%s", strings.Join(ours, "\n\n"))
	c.serve = startServe(c.t, c.dir)
}

// restart kills serve with SIGKILL and starts a new one on the state dir.
func (c *crashRun) restart() {
	c.mu.Lock()
	old := c.serve
	c.mu.Unlock()
	old.kill(c.t)
	p := startServe(c.t, c.dir)
	c.mu.Lock()
	c.serve = p
	c.mu.Unlock()
}

// killWhile kills and restarts serve at random points until done is
// closed, at least crashKills times (and at most maxCrashKills), so that
// kills land in every transition. It returns how many times it killed.
func (c *crashRun) killWhile(done <-chan struct{}, rng *rand.Rand) int {
	kills := 0
	for kills < maxCrashKills {
		select {
		case <-done:
			if kills >= crashKills {
				return kills
			}
		case <-time.After(time.Duration(300+rng.IntN(2000)) * time.Millisecond):
		}
		c.restart()
		kills++
	}
	return kills
}

// crashSeed returns the seed of the run: AGENTBOX_CRASH_SEED, else a new one.
func crashSeed(t *testing.T) uint64 {
	if v := os.Getenv("AGENTBOX_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("AGENTBOX_CRASH_SEED=%q: %v", v, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// crashWorker takes its sandboxes through create, a write, stop, start
// and a read, and deletes every other one; kept gets the sandboxes whose
// create was acknowledged and that it did not delete, with their files'
// contents.
func (c *crashRun) crashWorker(w int, kept map[string]string, mu *sync.Mutex) {
	for i := range crashPerWorker {
		if c.ended.Load() {
			return
		}
		var sb apiSandbox
		if st := c.call("POST", "/sandbox", map[string]any{"name": fmt.Sprintf("crash-%d-%d", w, i)}, &sb); st != http.StatusOK {
			continue // not acknowledged: it may exist or not
		}
		token := fmt.Sprintf("w%d-i%d", w, i)
		c.settle(sb.ID, stateStarted, "start")
		if _, ok := c.exec(sb.ID, "echo "+token+" > ~/f"); !ok {
			c.errorf("sandbox %s: the write never ran", sb.ID)
			continue
		}
		c.settle(sb.ID, stateStopped, "stop")
		c.settle(sb.ID, stateStarted, "start")
		if out, _ := c.exec(sb.ID, "cat ~/f"); strings.TrimSpace(out) != token {
			c.errorf("sandbox %s after stop and start: file %q, want %q", sb.ID, out, token)
		}
		if i%2 == 1 {
			c.settle(sb.ID, "gone", "delete")
			continue
		}
		mu.Lock()
		kept[sb.ID] = token
		mu.Unlock()
	}
}

func TestCrashesLeaveNoSandboxStuck(t *testing.T) {
	needRoot(t)
	seed := crashSeed(t)
	t.Logf("seed %d (AGENTBOX_CRASH_SEED=%d replays the kill points)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 27))
	c := &crashRun{t: t, dir: newLocalStateDir(t), client: &http.Client{Timeout: 30 * time.Second}}
	c.serve = startServe(t, c.dir)

	kept := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	t.Cleanup(func() { c.ended.Store(true); wg.Wait() })
	for w := range crashClients {
		wg.Add(1)
		go func() { defer wg.Done(); c.crashWorker(w, kept, &mu) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	kills := c.killWhile(done, rng)
	<-done
	t.Logf("%d kills; %d sandboxes kept", kills, len(kept))

	for id, token := range kept {
		c.settle(id, stateStarted, "start")
		if out, _ := c.exec(id, "cat ~/f"); strings.TrimSpace(out) != token {
			t.Errorf("sandbox %s at the end: file %q, want %q", id, out, token)
		}
	}
	var all listSandboxes
	if st := c.retry("GET", "/sandbox", nil, &all); st != http.StatusOK {
		t.Fatalf("list: %d", st)
	}
	for _, sb := range all.Items {
		c.settle(sb.ID, "gone", "delete")
	}
	checkNothingLeft(t, c.dir)
}

// checkNothingLeft fails t for what the sandboxes of stateDir left: a
// folder, an init process, a cgroup, a mount.
func checkNothingLeft(t *testing.T, stateDir string) {
	t.Helper()
	if infos, err := local.List(context.Background(), stateDir); err != nil || len(infos) != 0 {
		t.Errorf("sandboxes left in the state dir: %+v %v", infos, err)
	}
	ents, _ := os.ReadDir(filepath.Join(stateDir, "sandboxes"))
	for _, e := range ents {
		t.Errorf("folder left: %s", e.Name())
	}
	key := cgroupKeyPrefix(stateDir)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte("agentbox-init\x00")) {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup"))
		if bytes.Contains(cg, []byte(key)) {
			t.Errorf("init process left: %s (%q)", filepath.Dir(p), b)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, stateDir) {
			t.Errorf("mount left: %s", line)
		}
		f := strings.Fields(line)
		if len(f) > 4 && (strings.Contains(line, " - cgroup ") || strings.Contains(line, " - cgroup2 ")) {
			checkNoCgroups(t, f[4], key)
		}
	}
}

// checkNoCgroups fails t for each cgroup below the hierarchy mounted at
// mnt (three levels deep at most) whose name starts with prefix.
func checkNoCgroups(t *testing.T, mnt, prefix string) {
	t.Helper()
	for _, pat := range []string{"/agentbox/", "/*/agentbox/", "/*/*/agentbox/"} {
		left, _ := filepath.Glob(mnt + pat + prefix + "*")
		for _, d := range left {
			t.Errorf("cgroup left: %s", d)
		}
	}
}

// cgroupKeyPrefix is how the names of stateDir's sandboxes' cgroups begin
// (the FNV-1a hash of package local's cgroup.Key).
func cgroupKeyPrefix(stateDir string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(stateDir); i++ {
		h = (h ^ uint32(stateDir[i])) * 16777619
	}
	return fmt.Sprintf("%08x-", h)
}
