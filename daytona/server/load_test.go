package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// The load test (issue: 50 clients creating, executing in and deleting
// 200 sandboxes of the local engine through one serve on loopback): no
// request fails, and nothing is left behind — no process or cgroup of a
// sandbox, no mount of the state dir, no sandbox folder, no goroutine.

// Size of the load.
const (
	loadClients   = 50
	loadSandboxes = 200
)

// loadPoll is how often a load client polls a sandbox's state: as the
// SDKs do for their first 5 s (reference/daytona-api.md §2.6).
const loadPoll = 100 * time.Millisecond

// loadResult is what a load run measured.
type loadResult struct {
	create, exec []time.Duration // POST /sandbox until started; one command through the toolbox proxy
	total        time.Duration
}

// percentile returns the p-th percentile (0 < p ≤ 1) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// loadClient is one client of the load: plain HTTP to a serve whose every
// exchange is validated against the spec.
type loadClient struct {
	url    string
	client *http.Client
}

// call sends method path (under /api) with a JSON body and decodes the
// answer into out; it returns the status.
func (c *loadClient) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+"/api"+path, rd)
	if err != nil {
		return 0, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			return 0, fmt.Errorf("%s %s: decoding %s: %w", method, path, data, err)
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, nil
}

// waitFor polls sandbox id until it is in state want ("gone": 404).
func (c *loadClient) waitFor(ctx context.Context, id, want string) error {
	for {
		var sb apiSandbox
		st, err := c.call(ctx, "GET", "/sandbox/"+id, nil, &sb)
		switch {
		case err != nil:
			return err
		case want == "gone" && st == http.StatusNotFound, st == http.StatusOK && sb.State == want:
			return nil
		case st == http.StatusNotFound:
			return fmt.Errorf("sandbox %s is gone, want %s", id, want)
		case sb.State == stateError || sb.State == stateBuildFail:
			return fmt.Errorf("sandbox %s: %s: %s", id, sb.State, sb.ErrorReason)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s: state %s, want %s: %w", id, sb.State, want, ctx.Err())
		case <-time.After(loadPoll):
		}
	}
}

// lifecycle creates sandbox i, runs a command in it and deletes it.
func (c *loadClient) lifecycle(ctx context.Context, i int) (create, exec time.Duration, ids string, err error) {
	name := fmt.Sprintf("load-%d", i)
	t0 := time.Now()
	var sb apiSandbox
	if _, err := c.call(ctx, "POST", "/sandbox", map[string]any{"name": name}, &sb); err != nil {
		return 0, 0, "", err
	}
	if err := c.waitFor(ctx, sb.ID, stateStarted); err != nil {
		return 0, 0, sb.ID, err
	}
	create = time.Since(t0)
	tb, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: c.url + "/toolbox/" + sb.ID, Token: testKey, HTTPClient: c.client})
	if err != nil {
		return 0, 0, sb.ID, err
	}
	defer tb.Close()
	t1 := time.Now()
	res, err := tb.Execute(ctx, toolbox.ExecuteRequest{Command: "echo " + name})
	exec = time.Since(t1)
	if err != nil {
		return 0, 0, sb.ID, fmt.Errorf("%s: execute: %w", name, err)
	}
	if res.ExitCode != 0 || res.Result != name+"\n" {
		return 0, 0, sb.ID, fmt.Errorf("%s: execute: exit %d, %q", name, res.ExitCode, res.Result)
	}
	if _, err := c.call(ctx, "DELETE", "/sandbox/"+sb.ID, nil, nil); err != nil {
		return 0, 0, sb.ID, err
	}
	return create, exec, sb.ID, c.waitFor(ctx, sb.ID, "gone")
}

// loadConfig is one load run's.
type loadConfig struct {
	clients, n int
	// fake runs the sandboxes on the fake engine (fake_test.go): the
	// control plane alone, without the local engine's cost.
	fake bool
	// writesUnderLock is the server's baseline mode (Server.writesUnderLock).
	writesUnderLock bool
	// noWriteAhead is the baseline of write-ahead (Server.noWriteAhead).
	noWriteAhead bool
}

// runLoad runs cfg.clients clients through cfg.n sandboxes' lifecycles on
// a serve in a new state dir, checks that nothing is left behind, and
// returns what it measured.
func runLoad(tb testing.TB, cfg loadConfig) loadResult {
	tb.Helper()
	spectest.Dir(tb) // before the server starts: without the spec files the run skips here
	dir := tb.TempDir()
	var eng engine = localEngine{stateDir: dir}
	if cfg.fake {
		eng = newFakeEngine(tb)
	} else {
		// Run last: whatever a failed run left is removed.
		tb.Cleanup(func() {
			localtest.CheckNoneLeft(tb, dir)
		})
	}
	s, err := newServer(Options{APIKeys: []string{testKey}, StateDir: dir, MaxSandboxesPerOrg: 10 * loadSandboxes}, eng, defaultReconcileInterval, time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	s.writesUnderLock = cfg.writesUnderLock
	s.noWriteAhead = cfg.noWriteAhead
	srv := validatedServer(tb, harnessOptions{}, s)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.clients * 2
	c := &loadClient{url: srv.URL, client: &http.Client{Transport: tr}}
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		tr.CloseIdleConnections()
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Error(err)
		}
	}
	tb.Cleanup(closeAll)

	// A first sandbox makes what every sandbox of the state dir shares
	// (folders, the network's bridge), which stays.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, _, _, err := c.lifecycle(ctx, -1); err != nil {
		tb.Fatal(err)
	}
	before := takeLeakView(dir, nil)

	var (
		mu  sync.Mutex
		res loadResult
		ids []string
	)
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				create, exec, id, err := c.lifecycle(ctx, i)
				mu.Lock()
				if id != "" {
					ids = append(ids, id)
				}
				if err != nil {
					tb.Errorf("sandbox %d: %v", i, err)
				} else {
					res.create, res.exec = append(res.create, create), append(res.exec, exec)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range cfg.n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	res.total = time.Since(start)
	if tb.Failed() {
		return res
	}
	closeAll()
	after := takeLeakView(dir, ids)
	if d := after.diff(before); d != "" {
		tb.Errorf("left behind by %d sandboxes' lifecycles:\n%s", cfg.n, d)
	}
	return res
}

// leakView is what sandboxes could leave behind on the host.
type leakView struct {
	procs   []string // processes in a cgroup of a sandbox, or mentioning the state dir
	cgroups []string // cgroups named after a sandbox
	mounts  []string // mounts under the state dir
	folders []string // folders of the state dir, two levels deep
	errs    []string
}

// takeLeakView looks at the host for what the sandboxes ids of stateDir
// left.
func takeLeakView(stateDir string, ids []string) leakView {
	var v leakView
	named := func(s string) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(s, id) })
	}
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		cg, err1 := os.ReadFile(p + "/cgroup")
		cmd, err2 := os.ReadFile(p + "/cmdline")
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		if named(string(cg)) || strings.Contains(string(cmd), stateDir) {
			v.procs = append(v.procs, p+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	// The sandboxes' cgroups sit in an agentbox cgroup, in each
	// hierarchy, under this process's own cgroup there or the root.
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil || !d.IsDir():
			return nil
		case named(d.Name()):
			v.cgroups = append(v.cgroups, path)
			return filepath.SkipDir
		case strings.Count(path, "/") > 8:
			return filepath.SkipDir
		}
		return nil
	})
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		v.errs = append(v.errs, err.Error())
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, stateDir) {
			v.mounts = append(v.mounts, l)
		}
	}
	for _, pattern := range []string{"*", "*/*"} {
		fs, _ := filepath.Glob(filepath.Join(stateDir, pattern))
		for _, f := range fs {
			if filepath.Dir(f) == filepath.Join(stateDir, "hostroot") {
				// Base layers of host roots are the state dir's, one per
				// state of the host's /etc (which another process may
				// change meanwhile), not any sandbox's: local prunes them.
				continue
			}
			if st, err := os.Stat(f); err == nil && st.IsDir() {
				v.folders = append(v.folders, f)
			}
		}
	}
	return v
}

// diff says what v has that before had not.
func (v leakView) diff(before leakView) string {
	var b strings.Builder
	for _, e := range v.errs {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	for _, kind := range []struct {
		name      string
		now, then []string
	}{
		{"process", v.procs, nil}, // every one of a sandbox is a leak
		{"cgroup", v.cgroups, nil},
		{"mount", v.mounts, before.mounts},
		{"folder", v.folders, before.folders},
	} {
		for _, x := range kind.now {
			if !slices.Contains(kind.then, x) {
				fmt.Fprintf(&b, "%s: %s\n", kind.name, x)
			}
		}
	}
	return b.String()
}

// TestServeLoad runs the load: 50 clients through 200 sandboxes
// of the local engine, each created, executed in and deleted; every
// request succeeds and nothing is left behind. Under the race detector
// (CI), which makes a sandbox several times slower to make, 20 clients go
// through 40 sandboxes; with -short, 10 through 20.
func TestServeLoad(t *testing.T) {
	needRoot(t)
	goroutines := goleak.IgnoreCurrent()
	cfg := loadConfig{clients: loadClients, n: loadSandboxes}
	switch {
	case testing.Short():
		cfg.clients, cfg.n = 10, 20
	case raceEnabled:
		cfg.clients, cfg.n = 20, 40
	}
	res := runLoad(t, cfg)
	if t.Failed() {
		return
	}
	if len(res.create) != cfg.n {
		t.Fatalf("%d of %d lifecycles measured", len(res.create), cfg.n)
	}
	t.Logf("%d clients, %d sandboxes in %v: create p50 %v p99 %v; exec p50 %v p99 %v", cfg.clients, cfg.n, res.total.Round(time.Millisecond),
		percentile(res.create, 0.5), percentile(res.create, 0.99), percentile(res.exec, 0.5), percentile(res.exec, 0.99))
	goleak.VerifyNone(t, goroutines)
}

// BenchmarkServeLoad runs the load (50 clients, 200 sandboxes)
// b.N times and reports the percentiles of create (POST /sandbox until
// started, polled every 100 ms) and exec (one command through the toolbox proxy) over all
// runs, and sandboxes per second. Sub-benchmarks: local (the local
// engine) and fake (the fake engine: the control plane's own cost), each
// as the server is (grouped) and with its baseline, every record's write
// ending before the server's lock is released (under-lock).
func BenchmarkServeLoad(b *testing.B) {
	for _, eng := range []string{"local", "fake"} {
		for _, mode := range []string{"under-lock", "grouped"} {
			b.Run(eng+"/"+mode, func(b *testing.B) {
				testenv.Need(b, eng != "local" || os.Geteuid() == 0, "needs root: the local engine's default network and limits")
				cfg := loadConfig{clients: loadClients, n: loadSandboxes, fake: eng == "fake", writesUnderLock: mode == "under-lock"}
				var create, exec []time.Duration
				var total time.Duration
				for b.Loop() {
					res := runLoad(b, cfg)
					if b.Failed() {
						return
					}
					create, exec = append(create, res.create...), append(exec, res.exec...)
					total += res.total
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(percentile(create, 0.5)), "create-p50-ms")
				b.ReportMetric(ms(percentile(create, 0.99)), "create-p99-ms")
				b.ReportMetric(ms(percentile(exec, 0.5)), "exec-p50-ms")
				b.ReportMetric(ms(percentile(exec, 0.99)), "exec-p99-ms")
				b.ReportMetric(float64(len(create))/total.Seconds(), "sandboxes/s")
			})
		}
	}
}
