package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// metrics samples the fake sandbox id through its toolbox's real GET
// /system/metrics, as the local engine does, counting the calls
// ("metrics <id>"). It dials the socket itself: a sample is no use of the
// sandbox (lastUsed is not moved).
func (e *fakeEngine) metrics(ctx context.Context, id string) (*toolbox.SystemMetrics, error) {
	e.mu.Lock()
	e.calls["metrics "+id]++
	b, err := e.box(id)
	if err == nil && (b.srv == nil || b.paused) {
		err = fmt.Errorf("fake sandbox %s does not run", id)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", b.sock)
	if err != nil {
		return nil, err
	}
	return readSystemMetrics(ctx, conn)
}

// networkInfo tells the fake sandbox id's policy, with no refusal.
func (e *fakeEngine) networkInfo(_ context.Context, id string) (*sandbox.NetworkInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		return nil, err
	}
	return b.network.Info(), nil
}

// metricsServer starts a server over eng whose keys are those of a new
// state dir, sampling every interval; it returns the server, a client and
// the keys of organizations team-a and team-b.
func metricsServer(t *testing.T, eng engine, interval time.Duration) (*Server, *dashClient, string, string) {
	t.Helper()
	dir := t.TempDir()
	keyA := newOrgKey(t, dir, "alice", "team-a")
	keyB := newOrgKey(t, dir, "bob", "team-b")
	s, srv := serveTest(t, Options{StateDir: dir, Knobs: &Knobs{MetricsInterval: interval}}, eng)
	return s, &dashClient{t: t, url: srv.URL}, keyA, keyB
}

// createFake creates a sandbox with key and body and waits until it is
// started.
func createFake(t *testing.T, c *dashClient, key string, body map[string]any) string {
	t.Helper()
	var sb apiSandbox
	resp, data := c.do("POST", "/api/sandbox", body, "Authorization", "Bearer "+key)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &sb) != nil {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	waitFakeStarted(t, c, sb.ID, []string{"Authorization", "Bearer " + key})
	return sb.ID
}

// history gets sandbox id's metrics history with key and query q.
func history(t *testing.T, c *dashClient, key, id, q string) (int, metricsHistory, string) {
	t.Helper()
	resp, data := c.do("GET", "/api/sandbox/"+id+"/metrics/history"+q, nil, "Authorization", "Bearer "+key)
	var h metricsHistory
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &h); err != nil {
			t.Fatalf("history %s: %v", data, err)
		}
	}
	body := string(data)
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	return resp.StatusCode, h, body
}

// The sampler fills a started sandbox's history with the toolbox's
// figures, in the shape the dashboard's charts read.
func TestMetricsHistorySampled(t *testing.T) {
	eng := newFakeEngine(t)
	_, c, keyA, _ := metricsServer(t, eng, 20*time.Millisecond)
	id := createFake(t, c, keyA, map[string]any{})
	deadline := time.Now().Add(20 * time.Second)
	var h metricsHistory
	for len(h.Samples) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d samples after 20 s of sampling every 20 ms", len(h.Samples))
		}
		time.Sleep(20 * time.Millisecond)
		_, h, _ = history(t, c, keyA, id, "")
	}
	if h.IntervalSeconds != 0.02 {
		t.Errorf("intervalSeconds %v, want 0.02", h.IntervalSeconds)
	}
	for i, m := range h.Samples {
		if m.MemTotal <= 0 || m.MemUsed <= 0 || m.DiskTotal <= 0 || m.DiskUsed <= 0 || m.CPUUsedPct < 0 {
			t.Errorf("sample %d: %+v, want the toolbox's figures", i, m)
		}
		if i > 0 && m.Time.Before(h.Samples[i-1].Time) {
			t.Errorf("sample %d at %v is before sample %d at %v: want oldest first", i, m.Time, i-1, h.Samples[i-1].Time)
		}
	}
	// The names the dashboard's charts (sandbox.js) read.
	_, data := c.do("GET", "/api/sandbox/"+id+"/metrics/history?minutes=5", nil, "Authorization", "Bearer "+keyA)
	for _, name := range []string{`"intervalSeconds":`, `"samples":[`, `"time":`, `"cpuUsedPct":`, `"memUsed":`, `"memTotal":`, `"diskUsed":`, `"diskTotal":`} {
		if !strings.Contains(string(data), name) {
			t.Errorf("history %s has no %s", data, name)
		}
	}
}

// The history is bounded, filtered by minutes, checked like every
// sandbox route, stops growing when the sandbox stops and goes with it.
func TestMetricsHistory(t *testing.T) {
	eng := newFakeEngine(t)
	// Sampled by hand (sampleAll) only.
	s, c, keyA, keyB := metricsServer(t, eng, time.Hour)
	id := createFake(t, c, keyA, map[string]any{})
	ctx := context.Background()

	if st, h, body := history(t, c, keyA, id, ""); st != http.StatusOK || len(h.Samples) != 0 || h.IntervalSeconds != 3600 || !strings.Contains(body, `"samples":[]`) {
		t.Errorf("before any sample: %d %s, want no samples", st, body)
	}
	s.sampleAll(ctx)
	if n := eng.called("metrics " + id); n != 1 {
		t.Errorf("one round sampled the sandbox %d times", n)
	}
	if _, h, body := history(t, c, keyA, id, ""); len(h.Samples) != 1 {
		t.Errorf("after one round: %s, want one sample", body)
	}

	// Bounded: an hour and a half of samples every 10 s keeps the last
	// 360, oldest first.
	now := time.Now()
	for i := 540; i > 0; i-- {
		s.metrics.add(id, metricsSample{Time: now.Add(-time.Duration(i)*10*time.Second + 5*time.Second), MemUsed: int64(i)}, false)
	}
	_, h, _ := history(t, c, keyA, id, "?minutes=60")
	if len(h.Samples) != metricsHistoryLen {
		t.Fatalf("%d samples, want the last %d", len(h.Samples), metricsHistoryLen)
	}
	if first, last := h.Samples[0], h.Samples[len(h.Samples)-1]; first.MemUsed != 360 || last.MemUsed != 1 {
		t.Errorf("samples from %d to %d, want the last 360 (360 to 1)", first.MemUsed, last.MemUsed)
	}
	// minutes keeps the samples of the last N minutes.
	for _, c2 := range []struct {
		q    string
		want int
	}{{"?minutes=1", 6}, {"?minutes=10", 60}, {"", 360}} {
		if _, h, _ := history(t, c, keyA, id, c2.q); len(h.Samples) != c2.want {
			t.Errorf("%s: %d samples, want %d", c2.q, len(h.Samples), c2.want)
		}
	}
	for _, q := range []string{"0", "61", "-1", "1.5", "ten", "1e1", "%205", "60&minutes=x"} {
		st, _, body := history(t, c, keyA, id, "?minutes="+q)
		if st != http.StatusBadRequest || !strings.Contains(body, "minutes") || !strings.Contains(body, "1 to 60") {
			t.Errorf("minutes=%q: %d %s, want 400 naming minutes and 1 to 60", q, st, body)
		}
	}
	// Another organization's key, no key.
	if st, _, body := history(t, c, keyB, id, ""); st != http.StatusNotFound {
		t.Errorf("another organization's key: %d %s, want 404", st, body)
	}
	if resp, _ := c.do("GET", "/api/sandbox/"+id+"/metrics/history", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", resp.StatusCode)
	}

	// A stopped sandbox is not sampled; its history stays.
	auth := []string{"Authorization", "Bearer " + keyA}
	if resp, data := c.do("POST", "/api/sandbox/"+id+"/stop", nil, auth...); resp.StatusCode != http.StatusOK {
		t.Fatalf("stop: %d %s", resp.StatusCode, data)
	}
	waitFakeState(t, c, id, stateStopped, auth)
	before := eng.called("metrics " + id)
	s.sampleAll(ctx)
	s.sampleAll(ctx)
	if n := eng.called("metrics " + id); n != before {
		t.Errorf("a stopped sandbox was sampled %d times", n-before)
	}
	if _, h, _ := history(t, c, keyA, id, ""); len(h.Samples) != metricsHistoryLen {
		t.Errorf("a stopped sandbox's history has %d samples, want its %d", len(h.Samples), metricsHistoryLen)
	}
	// Deleted: the history goes at the next round.
	if resp, data := c.do("DELETE", "/api/sandbox/"+id, nil, auth...); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.StatusCode, data)
	}
	waitFakeState(t, c, id, "gone", auth)
	s.sampleAll(ctx)
	s.metrics.mu.Lock()
	_, kept := s.metrics.byID[id]
	s.metrics.mu.Unlock()
	if kept {
		t.Error("the history of a deleted sandbox is kept")
	}
	if st, _, _ := history(t, c, keyA, id, ""); st != http.StatusNotFound {
		t.Errorf("history of a deleted sandbox: %d, want 404", st)
	}
}

// Samples an hour old go, so does a sandbox's history once all its
// samples are; a ring keeps its order when it wraps.
func TestMetricsRing(t *testing.T) {
	var ms metricsSet
	now := time.Now()
	for i := range 1000 {
		ms.add("a", metricsSample{Time: now.Add(time.Duration(i) * time.Second), MemUsed: int64(i)}, false)
	}
	got := ms.since("a", time.Time{})
	if len(got) != metricsHistoryLen || got[0].MemUsed != 1000-metricsHistoryLen || got[len(got)-1].MemUsed != 999 {
		t.Fatalf("%d samples from %d to %d", len(got), got[0].MemUsed, got[len(got)-1].MemUsed)
	}
	for i := 1; i < len(got); i++ {
		if got[i].MemUsed != got[i-1].MemUsed+1 {
			t.Fatalf("sample %d is %d after %d", i, got[i].MemUsed, got[i-1].MemUsed)
		}
	}
	ms.add("old", metricsSample{Time: now.Add(-2 * time.Hour)}, false)
	if !ms.add("failing", metricsSample{}, true) || ms.add("failing", metricsSample{}, true) {
		t.Error("a failure is new once, until a sample succeeds")
	}
	ms.add("gone", metricsSample{Time: now}, false)
	ms.prune(func(id string) bool { return id != "gone" }, now.Add(-time.Hour))
	if ms.len() != 2 || len(ms.since("a", time.Time{})) != metricsHistoryLen || len(ms.since("old", time.Time{})) != 0 {
		t.Errorf("after pruning %d histories, want a's and failing's", ms.len())
	}
	if ms.add("failing", metricsSample{}, true) {
		t.Error("a failure kept through pruning is new again: it would be logged at every round")
	}
	if s := sampleOf(&toolbox.SystemMetrics{CPUCount: 2, CPUUsedPct: 1e9, MemUsed: -5}, now); s.CPUUsedPct != 200 || s.MemUsed != 0 {
		t.Errorf("a sandbox's odd figures gave %+v, want them bounded", s)
	}
}

// Close ends the sampler and leaves nothing running.
func TestMetricsSamplerEndsOnClose(t *testing.T) {
	goroutines := goleak.IgnoreCurrent()
	eng := newFakeEngine(t)
	dir := t.TempDir()
	s, err := newServer(Options{APIKeys: []string{testKey}, StateDir: dir, Knobs: &Knobs{MetricsInterval: 5 * time.Millisecond}}, eng, 5*time.Millisecond, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	c := &dashClient{t: t, url: srv.URL}
	id := createFake(t, c, testKey, map[string]any{})
	deadline := time.Now().Add(20 * time.Second)
	for eng.called("metrics "+id) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the sandbox was not sampled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	auth := []string{"Authorization", "Bearer " + testKey}
	if resp, data := c.do("DELETE", "/api/sandbox/"+id, nil, auth...); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.StatusCode, data)
	}
	waitFakeState(t, c, id, "gone", auth)
	srv.Close()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, goroutines)
}

// waitFakeState waits until sandbox id is in state want ("gone": deleted).
func waitFakeState(t *testing.T, c *dashClient, id, want string, hdr []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var sb apiSandbox
		resp, data := c.do("GET", "/api/sandbox/"+id, nil, hdr...)
		if want == "gone" && resp.StatusCode == http.StatusNotFound || json.Unmarshal(data, &sb) == nil && sb.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: %d %s, want %s", id, resp.StatusCode, data, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
