package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// newPlainHarness is a harness whose exchanges are not checked against
// Daytona's spec files, which have no dashboard.
func newPlainHarness(t *testing.T, eng engine, stateDir string) *harness {
	t.Helper()
	s, srv := serveTest(t, Options{APIKeys: []string{testKey}, StateDir: stateDir}, eng)
	return &harness{t: t, s: s, url: srv.URL, client: srv.Client(), stateDir: stateDir}
}

// chromium is Debian's headless browser, which scripts/test.sh installs.
const chromium = "/usr/bin/chromium"

// newBrowser starts one headless Chromium for the test, for 90 s.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return newBrowserFor(t, 90*time.Second)
}

// newBrowserFor starts one headless Chromium for the test, for d.
func newBrowserFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	testenv.NeedTool(t, chromium, "chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1366, 768),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelC := context.WithTimeout(ctx, d)
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// screenshotDir is where the test saves its screenshots:
// $AGENTBOX_DASHBOARD_SCREENSHOTS, or a temporary folder.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("AGENTBOX_DASHBOARD_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// shot saves a screenshot of the page as name.png.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitText waits until the text of sel holds want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`)||{}).innerText||""`))
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q, want it to hold %q", sel, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sdkSandbox creates a sandbox through the Daytona SDK against h, as an
// agent would, waits until it is started, and deletes it when the test
// ends.
func sdkSandbox(t *testing.T, h *harness, req daytona.CreateSandbox) *daytona.SandboxDTO {
	t.Helper()
	c, err := daytona.NewClient(daytona.Config{APIURL: h.url + "/api", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sb, err := c.CreateSandbox(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.call("DELETE", "/sandbox/"+sb.ID, nil, nil); h.waitState(sb.ID, "gone") })
	h.waitState(sb.ID, stateStarted)
	return sb
}

// browse returns a function that runs actions in the browser ctx,
// failing t with what when they fail.
func browse(t *testing.T, ctx context.Context) func(what string, actions ...chromedp.Action[chromedp.Void]) {
	return func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

func jsString(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// The dashboard in a real browser against a real serve: log in, see a
// sandbox an SDK created, stop and start it, follow a command's output
// live, upload and download a file, use the terminal.
func TestDashboardBrowser(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	h := newPlainHarness(t, localEngine{stateDir: dir}, dir)
	ctx := newBrowser(t)
	shots := screenshotDir(t)
	sb := sdkSandbox(t, h, daytona.CreateSandbox{Name: "from-sdk", Labels: map[string]string{"team": "web"}})

	run := browse(t, ctx)
	run("login", chromedp.Navigate(h.url+"/dashboard/"), chromedp.WaitVisible(chromedp.CSS("#key")))
	shot(t, ctx, shots, "login")
	run("login", chromedp.SendKeys(chromedp.CSS("#key"), testKey), chromedp.Click(chromedp.CSS("#login-button")))
	waitText(t, ctx, "#sandbox-list", "from-sdk")
	shot(t, ctx, shots, "sandboxes")

	row := `tr[data-id="` + sb.ID + `"]`
	run("stop", chromedp.Click(chromedp.CSS(row+` button[data-action="stop"]`)))
	h.waitState(sb.ID, stateStopped)
	waitText(t, ctx, row, "stopped")
	run("start", chromedp.Click(chromedp.CSS(row+` button[data-action="start"]`)))
	h.waitState(sb.ID, stateStarted)
	waitText(t, ctx, row, "started")

	// A command printing a line every 200 ms: lines show before it ends.
	run("processes", chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/processes"), chromedp.WaitVisible(chromedp.CSS("#command")),
		chromedp.SendKeys(chromedp.CSS("#command"), "for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i; sleep 0.2; done; echo all-done"),
		chromedp.Click(chromedp.CSS("#run-button")))
	waitText(t, ctx, "#log", "line-2")
	log, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#log")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log, "all-done") {
		t.Fatalf("the log showed %q only once the command ended, want its lines as they print", log)
	}
	waitText(t, ctx, "#log", "all-done")
	shot(t, ctx, shots, "processes")

	// Upload a file, then download it through the page's link.
	want := bytes.Repeat([]byte("dashboard\x00\xff"), 1000)
	src := filepath.Join(t.TempDir(), "up.bin")
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	downloads := t.TempDir()
	run("files", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
		return err
	}),
		chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/files"), chromedp.WaitVisible(chromedp.CSS("#upload-file")),
		chromedp.SetUploadFiles(chromedp.CSS("#upload-file"), []string{src}), chromedp.Click(chromedp.CSS("#upload-button")))
	waitText(t, ctx, "#file-list", "up.bin")
	shot(t, ctx, shots, "files")
	run("download", chromedp.Click(chromedp.CSS(`tr[data-name="up.bin"] button.download`)))
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(downloads, "up.bin"))
		if err == nil && bytes.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("downloaded %d bytes (%v), want the %d uploaded", len(got), err, len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The terminal: type, read the answer, exit.
	run("terminal", chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/terminal"), chromedp.WaitVisible(chromedp.CSS("#term-open")),
		chromedp.Click(chromedp.CSS("#term-open")))
	waitText(t, ctx, "#term-status", "connected")
	run("type", chromedp.Focus(chromedp.CSS("#term")), chromedp.KeyEvent("echo $((6*7))\r"))
	waitText(t, ctx, "#term", "42")
	shot(t, ctx, shots, "terminal")
	run("exit", chromedp.KeyEvent("exit\r"))
	waitText(t, ctx, "#term-status", "exited")

	for _, p := range []string{"network", "charts", "activity"} {
		run(p, chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/"+p), chromedp.WaitVisible(chromedp.CSS("#panel h2")))
		shot(t, ctx, shots, p)
	}
	for _, p := range []string{"images", "volumes", "keys"} {
		run(p, chromedp.Navigate(h.url+"/dashboard/#/"+p), chromedp.WaitVisible(chromedp.CSS("main h1")))
		shot(t, ctx, shots, p)
	}
}
