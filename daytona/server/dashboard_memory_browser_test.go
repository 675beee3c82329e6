package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
)

// The log window of logs.js: what the live log keeps.
const (
	logWindowLines = 5000
	// logLine is the line the test prints: 63 characters and a newline.
	logLine   = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!"
	logStream = 10 << 20 // bytes streamed
)

// pageMemory is what the browser holds for the page, after a garbage
// collection.
type pageMemory struct {
	heap  float64 // JSHeapUsedSize, bytes
	nodes float64 // DOM nodes
}

// measurePage collects the page's garbage and reads Chromium's run-time
// metrics.
func measurePage(t *testing.T, ctx context.Context) pageMemory {
	t.Helper()
	var m pageMemory
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, performance.Enable, performance.EnableParams{}); err != nil {
			return err
		}
		if _, err := chromedp.Call(ctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
			return err
		}
		res, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
		if err != nil {
			return err
		}
		for _, x := range res.Metrics {
			switch x.Name {
			case "JSHeapUsedSize":
				m.heap = x.Value
			case "Nodes":
				m.nodes = x.Value
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if m.heap == 0 || m.nodes == 0 {
		t.Fatalf("no JSHeapUsedSize or Nodes in Chromium's metrics: %+v", m)
	}
	return m
}

// A live log of 10 MiB streams to the page without the browser's memory
// growing past the log's visible window: after it, the JS heap has grown
// by less than a few windows' worth of text (far less than the 10 MiB),
// the log holds the window's 5 000 lines, and the DOM as many nodes more
// as the window has lines.
func TestDashboardLogMemory(t *testing.T) {
	h := newPlainHarness(t, newFakeEngine(t), t.TempDir())
	var sb apiSandbox
	if st := h.call("POST", "/sandbox", map[string]any{}, &sb); st != 200 {
		t.Fatalf("create: %d", st)
	}
	h.waitState(sb.ID, stateStarted)
	ctx := newBrowserFor(t, 5*time.Minute)
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run("login", chromedp.Navigate(h.url+"/dashboard/"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), testKey), chromedp.Click(chromedp.CSS("#login-button")))
	waitText(t, ctx, "#sandbox-list", sb.Name)
	run("processes", chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/processes"), chromedp.WaitVisible(chromedp.CSS("#command")))
	before := measurePage(t, ctx)

	lines := logStream / len(logLine+"\n")
	began := time.Now()
	run("stream", chromedp.SendKeys(chromedp.CSS("#command"), "yes "+logLine+" | head -n "+strconv.Itoa(lines)+"; echo stream-done"),
		chromedp.Click(chromedp.CSS("#run-button")))
	// The stream takes tens of seconds (see docs/benchmarks.md): wait
	// for its end longer than waitText does.
	deadline := time.Now().Add(4 * time.Minute)
	for {
		st, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#log-status').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(st, "ended") {
			t.Logf("streamed in %v (the page's reading, not asserted)", time.Since(began).Round(100*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream has not ended after 4 minutes: %q", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitText(t, ctx, "#log", "stream-done")
	waitText(t, ctx, "#log-note", "earlier lines dropped")
	after := measurePage(t, ctx)
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector('#log').childElementCount`))
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector('#log').textContent.length`))
	if err != nil {
		t.Fatal(err)
	}
	window := float64(logWindowLines * len(logLine+"\n"))
	grown := after.heap - before.heap
	t.Logf("streamed %d lines (%d bytes); the log keeps %d lines (%d characters); JS heap %.0f → %.0f bytes (%+.0f, %.2f windows of %.0f bytes); DOM nodes %.0f → %.0f",
		lines, lines*len(logLine+"\n"), kept, text, before.heap, after.heap, grown, grown/window, window, before.nodes, after.nodes)
	if kept != logWindowLines {
		t.Errorf("the log keeps %d lines, want its window of %d", kept, logWindowLines)
	}
	if text > logWindowLines*len(logLine) {
		t.Errorf("the log holds %d characters, more than its window's %d", text, logWindowLines*len(logLine))
	}
	// A view that kept the stream would hold 10 MiB (32 windows) of it.
	if grown > 4*window {
		t.Errorf("the JS heap grew by %.0f bytes, more than 4 windows (%.0f bytes) for a window of %d lines", grown, 4*window, logWindowLines)
	}
	if extra := after.nodes - before.nodes; extra > 3*logWindowLines {
		t.Errorf("%.0f more DOM nodes, want at most 3 per line of the window (%d)", extra, 3*logWindowLines)
	}
}
