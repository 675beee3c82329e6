package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
)

// newSampledHarness is newPlainHarness over the local engine of a new
// state dir, sampling the metrics every interval.
func newSampledHarness(t *testing.T, interval time.Duration) *harness {
	t.Helper()
	dir := newLocalStateDir(t)
	s, srv := serveTest(t, Options{APIKeys: []string{testKey}, StateDir: dir, Knobs: &Knobs{MetricsInterval: interval}}, localEngine{stateDir: dir})
	return &harness{t: t, s: s, url: srv.URL, client: srv.Client(), stateDir: dir}
}

// The network tab shows a connection the sandbox's policy refused, and
// the charts tab draws the sampled metrics, in a real browser against a
// real serve.
func TestDashboardNetworkAndCharts(t *testing.T) {
	needRoot(t)
	testenv.NeedTool(t, "curl", "curl") // run inside: the sandbox's root is the host's /usr
	h := newSampledHarness(t, 200*time.Millisecond)
	ctx := newBrowser(t)
	shots := screenshotDir(t)
	// Names only, through the egress proxy: any address is refused
	// there, without a packet leaving.
	sb := sdkSandbox(t, h, daytona.CreateSandbox{Name: "net-policy", DomainAllowList: "example.com"})

	run := browse(t, ctx)
	run("login", chromedp.Navigate(h.url+"/dashboard/"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), testKey), chromedp.Click(chromedp.CSS("#login-button")))
	waitText(t, ctx, "#sandbox-list", "net-policy")

	// A refused connection to a TEST-NET address, from the page.
	run("processes", chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/processes"), chromedp.WaitVisible(chromedp.CSS("#command")),
		chromedp.SendKeys(chromedp.CSS("#command"), "curl -fsS --max-time 5 http://192.0.2.1/ -o /dev/null; echo curl-exit=$?"),
		chromedp.Click(chromedp.CSS("#run-button")))
	waitText(t, ctx, "#log", "curl-exit=")
	if got, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#log"))); strings.Contains(got, "curl-exit=0") {
		t.Fatalf("the connection to 192.0.2.1 was let through: %q", got)
	}
	run("network", chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/network"), chromedp.WaitVisible(chromedp.CSS("#network")))
	waitText(t, ctx, "#network", "192.0.2.1:80")
	waitText(t, ctx, "#network", "domainAllowList")
	waitText(t, ctx, "#network", "example.com")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#network tr.refusal').length`)); n < 1 {
		t.Errorf("%d rows in the policy log, want the refusal", n)
	}
	shot(t, ctx, shots, "network-policy-log")

	// Charts: wait for a few samples, then the page draws them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var hist metricsHistory
		if st := h.call("GET", "/sandbox/"+sb.ID+"/metrics/history?minutes=5", nil, &hist); st == 200 && len(hist.Samples) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 samples after 30 s of sampling every 200 ms")
		}
		time.Sleep(100 * time.Millisecond)
	}
	run("charts", chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/charts"), chromedp.WaitVisible(chromedp.CSS("#chart-cpu svg")))
	for _, id := range []string{"chart-cpu", "chart-mem", "chart-disk"} {
		waitText(t, ctx, "#"+id, "samples")
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`((document.querySelector('#`+id+` path.line')||{getAttribute(){return ''}}).getAttribute('d')||'').split(/[ML]/).filter(Boolean).length`))
		if err != nil {
			t.Fatal(err)
		}
		if n < 2 {
			t.Errorf("%s: a line of %d points, want the samples (> 1)", id, n)
		}
		summary, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#"+id+" .summary")))
		if k := strings.Fields(summary); len(k) < 2 || k[len(k)-1] != "samples" {
			t.Errorf("%s: summary %q", id, summary)
		} else if got, _ := strconv.Atoi(k[len(k)-2]); got != n {
			t.Errorf("%s: summary says %d samples, the line has %d points", id, got, n)
		}
	}
	shot(t, ctx, shots, "charts")
}

// Sampling a local sandbox's metrics is no use of it: its last use (and
// so its auto-stop) does not move, while a toolbox request moves it.
func TestMetricsSamplingIsPassive(t *testing.T) {
	needRoot(t)
	h := newSampledHarness(t, 50*time.Millisecond)
	var sb apiSandbox
	if st := h.call("POST", "/sandbox", map[string]any{}, &sb); st != 200 {
		t.Fatalf("create: %d", st)
	}
	t.Cleanup(func() { h.call("DELETE", "/sandbox/"+sb.ID, nil, nil); h.waitState(sb.ID, "gone") })
	h.waitState(sb.ID, stateStarted)
	samples := func() int {
		var hist metricsHistory
		h.call("GET", "/sandbox/"+sb.ID+"/metrics/history", nil, &hist)
		return len(hist.Samples)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("a first sample", func() bool { return samples() >= 1 })
	since := time.Now() // every use of the create is before
	n := samples()
	// 40 samples: 2 s, more than the second a use takes to be stamped.
	waitFor("40 more samples", func() bool { return samples() >= n+40 })
	eng := localEngine{stateDir: h.stateDir}
	st, err := eng.status(context.Background(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.lastUsed.After(since) {
		t.Errorf("last used %v, after sampling began at %v: the samples counted as uses", st.lastUsed, since)
	}
	// A toolbox request through serve does count (the check above can
	// fail), even when it says it is passive: only serve's own sampler
	// may, and the proxy drops the header from a client's request.
	if code := h.status("/api/toolbox/"+sb.ID+"/toolbox/version", map[string]string{local.PassiveRequestHeader: "1"}); code != 200 {
		t.Fatalf("toolbox version: %d", code)
	}
	waitFor("the toolbox request's use", func() bool {
		st, err := eng.status(context.Background(), sb.ID)
		return err == nil && st.lastUsed.After(since)
	})
}
