package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// The activity tab in a real browser against a real serve: a command run
// through the toolbox shows with its exit code and who ran it, next to
// the sandbox's creation, its change of network policy and the
// connection the policy refused; the kind filter keeps the commands only.
func TestDashboardActivityBrowser(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	h := newPlainHarness(t, localEngine{stateDir: dir}, dir)
	ctx := newBrowser(t)
	shots := screenshotDir(t)
	sb := sdkSandbox(t, h, daytona.CreateSandbox{Name: "trail", DomainAllowList: "allowed.test"})
	tc, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: h.url + "/toolbox/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	res, err := tc.Execute(context.Background(), toolbox.ExecuteRequest{Command: "echo activity-probe; exit 5"})
	if err != nil || res.ExitCode != 5 {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	// A name the sandbox's domain allow list does not hold: its egress
	// proxy refuses it (nothing leaves the machine), and the policy log
	// says so.
	allow := "allowed.test,also.test"
	if st := h.call("POST", "/sandbox/"+sb.ID+"/network-settings", networkSettings{DomainAllowList: &allow}, nil); st != 200 {
		t.Fatalf("network settings: %d", st)
	}
	res, err = tc.Execute(context.Background(), toolbox.ExecuteRequest{Command: "curl -sS --max-time 10 http://refused.test/ 2>&1"})
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	t.Logf("curl through the egress proxy: exit %d %q", res.ExitCode, res.Result)

	run := browse(t, ctx)
	run("login", chromedp.Navigate(h.url+"/dashboard/"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), testKey), chromedp.Click(chromedp.CSS("#login-button")))
	waitText(t, ctx, "#sandbox-list", "trail")
	run("activity", chromedp.Navigate(h.url+"/dashboard/#/sandbox/"+sb.ID+"/activity"), chromedp.WaitVisible(chromedp.CSS("#activity-kind")))
	waitText(t, ctx, "#activity", "echo activity-probe; exit 5")
	// The command's row: who, what, exit code, a duration.
	rows := func() []string {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#activity tbody tr')].map((r) => [...r.cells].map((c) => c.innerText).join('|'))`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	var command string
	var kinds []string
	for _, r := range rows() {
		cells := strings.Split(r, "|")
		if len(cells) != 7 {
			t.Fatalf("activity row %q: %d cells, want 7", r, len(cells))
		}
		kinds = append(kinds, cells[1])
		if cells[3] == "echo activity-probe; exit 5" {
			command = r
			if cells[1] != "command" || cells[2] != DefaultOrganizationID || cells[4] != "5" || !strings.HasSuffix(cells[5], " ms") {
				t.Errorf("the command's row %q: want kind command, actor %s, exit code 5, a duration", r, DefaultOrganizationID)
			}
		}
	}
	if command == "" || !strings.Contains(strings.Join(kinds, ","), "lifecycle") {
		t.Fatalf("activity rows %q: want the command and the sandbox's creation", rows())
	}
	waitText(t, ctx, "#activity", "refused.test:80")
	waitText(t, ctx, "#activity", "network-settings")
	waitText(t, ctx, "#activity caption", "entries, page 1 of 1")
	shot(t, ctx, shots, "activity")

	// Only commands.
	run("filter", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#activity-kind'); s.value = 'command'; s.dispatchEvent(new Event('change')); })()`))
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := rows()
		only := len(got) > 0
		for _, r := range got {
			only = only && strings.Split(r, "|")[1] == "command"
		}
		if only {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows with the command filter: %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
