package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestMain(m *testing.M) {
	local.Init() // the test binary is re-executed as local sandboxes' init
	if dir := os.Getenv(childServeEnv); dir != "" {
		os.Exit(childServe(dir)) // re-executed as a serve (restart_test.go)
	}
	goleak.VerifyTestMain(m)
}

func TestLifecycleStatesVisible(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})

	release := eng.block("create")
	sb := h.create(map[string]any{
		"name":   "first",
		"labels": map[string]string{"team": "infra"},
		"env":    map[string]string{"GREETING": "hello"},
		"target": "us",
	})
	if sb.State != stateCreating || sb.DesiredState != stateStarted {
		t.Fatalf("create answered state %q desired %q, want creating/started", sb.State, sb.DesiredState)
	}
	if sb.User != "daytona" || sb.Name != "first" || sb.Labels["team"] != "infra" || sb.Env["GREETING"] != "hello" {
		t.Fatalf("create answered %+v", sb)
	}
	if want := h.url + "/toolbox"; sb.ToolboxProxyURL != want {
		t.Fatalf("toolboxProxyUrl = %q, want %q", sb.ToolboxProxyURL, want)
	}
	// The transitional state is what pollers see, and lifecycle calls
	// meanwhile get Daytona's 409.
	if got, _ := h.get(sb.ID); got.State != stateCreating {
		t.Fatalf("while creating, GET says %q", got.State)
	}
	for _, op := range []string{"start", "stop"} {
		var e apiError
		if st := h.call("POST", "/sandbox/"+sb.ID+"/"+op, nil, &e); st != http.StatusConflict || e.Message != msgStateChange {
			t.Fatalf("%s while creating: %d %+v, want 409 %q", op, st, e, msgStateChange)
		}
	}
	if st := h.call("DELETE", "/sandbox/"+sb.ID, nil, nil); st != http.StatusConflict {
		t.Fatalf("delete while creating: %d, want 409", st)
	}
	release()
	got := h.waitState(sb.ID, stateStarted)
	if got.CPU != 2 || got.Memory != 4 || got.Disk != 8 {
		t.Fatalf("sizes after creation: cpu %v memory %v disk %v, want the engine's 2/4/8", got.CPU, got.Memory, got.Disk)
	}
	// By name too.
	if byName, st := h.get("first"); st != http.StatusOK || byName.ID != sb.ID {
		t.Fatalf("get by name: %d %+v", st, byName)
	}
	// Starting a started sandbox does nothing.
	if st := h.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil); st != http.StatusOK {
		t.Fatalf("start when started: %d", st)
	}

	release = eng.block("stop")
	var stopping apiSandbox
	if st := h.call("POST", "/sandbox/first/stop?force=true", nil, &stopping); st != http.StatusOK || stopping.State != stateStopping {
		t.Fatalf("stop: %d state %q, want 200 stopping", st, stopping.State)
	}
	release()
	h.waitState(sb.ID, stateStopped)
	var e apiError
	if st := h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, &e); st != http.StatusBadRequest || !strings.Contains(e.Message, "not in a stoppable state") {
		t.Fatalf("stop when stopped: %d %+v", st, e)
	}

	release = eng.block("start")
	var starting apiSandbox
	if st := h.call("POST", "/sandbox/"+sb.ID+"/start", nil, &starting); st != http.StatusOK || starting.State != stateStarting {
		t.Fatalf("start: %d state %q, want 200 starting", st, starting.State)
	}
	release()
	h.waitState(sb.ID, stateStarted)

	release = eng.block("remove")
	var destroying apiSandbox
	if st := h.call("DELETE", "/sandbox/"+sb.ID, nil, &destroying); st != http.StatusOK || destroying.State != stateDestroying || destroying.DesiredState != stateDestroyed {
		t.Fatalf("delete: %d %+v, want 200 destroying/destroyed", st, destroying)
	}
	release()
	h.waitState(sb.ID, "gone")
	if st := h.call("GET", "/sandbox/first", nil, &e); st != http.StatusNotFound || e.Message != "Sandbox with ID or name first not found" || e.Error != "Not Found" {
		t.Fatalf("get after delete: %d %+v", st, e)
	}
	if n := eng.called("remove"); n != 1 {
		t.Fatalf("engine remove called %d times, want 1", n)
	}
}

func TestNameConflict(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"name": "taken"})
	var e apiError
	if st := h.call("POST", "/sandbox", map[string]any{"name": "taken"}, &e); st != http.StatusConflict || e.Message != "Sandbox with name taken already exists" {
		t.Fatalf("second create of a name: %d %+v", st, e)
	}
	// An id is a name too.
	if st := h.call("POST", "/sandbox", map[string]any{"name": sb.ID}, nil); st != http.StatusConflict {
		t.Fatalf("create named as another's id: %d, want 409", st)
	}
	h.waitState(sb.ID, stateStarted)
	if n := eng.called("create"); n != 1 {
		t.Fatalf("engine create called %d times, want 1", n)
	}
	// Without a name, the id is the name.
	anon := h.create(map[string]any{})
	if anon.Name != anon.ID {
		t.Fatalf("unnamed sandbox: name %q, id %q", anon.Name, anon.ID)
	}
}

func TestAuth(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	for _, key := range []string{"", "wrong", testKey + "x"} {
		var e apiError
		if st := h.callKey(key, "GET", "/sandbox", nil, &e); st != http.StatusUnauthorized || e.StatusCode != 401 {
			t.Fatalf("key %q: %d %+v, want 401", key, st, e)
		}
		if st := h.callKey(key, "POST", "/sandbox", map[string]any{}, nil); st != http.StatusUnauthorized {
			t.Fatalf("create with key %q: %d, want 401", key, st)
		}
	}
	var list listSandboxes
	if h.call("GET", "/sandbox", nil, &list); len(list.Items) != 0 {
		t.Fatalf("refused creates created %d sandboxes", len(list.Items))
	}
	// /config needs no key.
	var cfg configuration
	if st := h.callKey("", "GET", "/config", nil, &cfg); st != http.StatusOK || cfg.DefaultSnapshot != DefaultSnapshot || cfg.ProxyToolboxURL != h.url+"/toolbox" {
		t.Fatalf("config: %d %+v", st, cfg)
	}
	// Nor does the toolbox proxy accept a request without it.
	req, _ := http.NewRequest("GET", h.url+"/toolbox/x/version", nil)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("toolbox without key: %d", resp.StatusCode)
	}
}

func TestBadInput(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{badRequests: true})
	for _, c := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		msg    string
	}{
		{"malformed JSON", "POST", "/sandbox", `{"name":`, 400, "not valid JSON"},
		{"wrong type", "POST", "/sandbox", `{"cpu":"two"}`, 400, "cpu"},
		{"negative interval", "POST", "/sandbox", `{"autoStopInterval":-1}`, 400, "autoStopInterval"},
		{"name with a slash", "POST", "/sandbox", `{"name":"a/b"}`, 400, "name"},
		{"engine refuses", "POST", "/sandbox", `{"cpu":100}`, 400, "more than the host has"},
		{"unknown snapshot", "POST", "/sandbox", `{"snapshot":"ubuntu:22.04"}`, 400, "Snapshot ubuntu:22.04 not found"},
		{"image", "POST", "/sandbox", `{"buildInfo":{"dockerfileContent":"FROM alpine\n"}}`, 501, "buildInfo"},
		{"gpu", "POST", "/sandbox", `{"gpu":1}`, 501, "GPUs"},
		{"bad state filter", "GET", "/sandbox?states=running", nil, 400, "states"},
		{"bad labels filter", "GET", "/sandbox?labels=team", nil, 400, "labels"},
		{"bad cursor", "GET", "/sandbox?cursor=%21", nil, 400, "cursor"},
		{"bad limit", "GET", "/sandbox?limit=500", nil, 400, "limit"},
		{"bad sort", "GET", "/sandbox?sort=size", nil, 400, "sort"},
		{"unknown sandbox", "POST", "/sandbox/nope/start", nil, 404, "Sandbox with ID or name nope not found"},
		{"unknown route", "GET", "/nothing", nil, 404, "Cannot GET /api/nothing"},
	} {
		var e apiError
		if st := h.call(c.method, c.path, c.body, &e); st != c.status || e.StatusCode != c.status || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: %d %+v, want %d with %q", c.name, st, e, c.status, c.msg)
		}
	}
	var list listSandboxes
	if h.call("GET", "/sandbox", nil, &list); len(list.Items) != 0 || eng.called("create") != 0 {
		t.Fatalf("refused creates created sandboxes: %d listed, %d engine creates", len(list.Items), eng.called("create"))
	}
	// Unknown fields are ignored; the default snapshot is accepted.
	sb := h.create(`{"snapshot":"` + DefaultSnapshot + `","somethingNew":{"x":1},"labels":{"a":"b"}}`)
	if sb.Labels["a"] != "b" {
		t.Fatalf("create with an unknown field: %+v", sb)
	}
}

func TestListFiltersAndPaging(t *testing.T) {
	eng := newFakeEngine(t)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHarness(t, eng, harnessOptions{now: clock.Now})
	var ids []string // in creation order
	for i, name := range []string{"c", "a", "e", "b", "d"} {
		team := "infra"
		if i%2 == 1 {
			team = "web"
		}
		sb := h.create(map[string]any{"name": name, "labels": map[string]string{"team": team}})
		ids = append(ids, sb.ID)
		clock.advance(time.Second)
	}
	for _, id := range ids {
		h.waitState(id, stateStarted)
	}
	// Newest first by default, in pages of 2, every sandbox once.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		var page listSandboxes
		q := url.Values{"limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if st := h.call("GET", "/sandbox?"+q.Encode(), nil, &page); st != http.StatusOK {
			t.Fatalf("list: %d", st)
		}
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("paged list = %q, want %q", got, want)
	}
	names := func(q string) []string {
		t.Helper()
		var page listSandboxes
		if st := h.call("GET", "/sandbox?"+q, nil, &page); st != http.StatusOK {
			t.Fatalf("list %s: %d", q, st)
		}
		var out []string
		for _, it := range page.Items {
			out = append(out, it.Name)
		}
		return out
	}
	if got := names("sort=name&order=asc"); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("by name: %q", got)
	}
	if got := names("sort=name&order=asc&labels=" + url.QueryEscape(`{"team":"web"}`)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("labels team=web: %q", got)
	}
	if got := names("name=C"); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("name prefix C: %q", got)
	}
	// A cursor stays valid when its sandbox is deleted.
	var first listSandboxes
	h.call("GET", "/sandbox?sort=name&order=asc&limit=2", nil, &first)
	h.call("DELETE", "/sandbox/b", nil, nil)
	h.waitState(ids[3], "gone")
	var rest listSandboxes
	h.call("GET", "/sandbox?sort=name&order=asc&limit=10&cursor="+url.QueryEscape(*first.NextCursor), nil, &rest)
	var restNames []string
	for _, it := range rest.Items {
		restNames = append(restNames, it.Name)
	}
	if !slices.Equal(restNames, []string{"c", "d", "e"}) {
		t.Fatalf("after a deleted cursor: %q", restNames)
	}
	var states listSandboxes
	if h.call("GET", "/sandbox?states=stopped", nil, &states); len(states.Items) != 0 {
		t.Fatalf("states=stopped listed %d", len(states.Items))
	}
	var paged paginatedSandboxes
	if st := h.call("GET", "/sandbox/paginated?page=2&limit=3", nil, &paged); st != http.StatusOK || paged.Total != 4 || paged.TotalPages != 2 || len(paged.Items) != 1 {
		t.Fatalf("paginated: %d total %d pages %d items %d", st, paged.Total, paged.TotalPages, len(paged.Items))
	}
}

func TestSettings(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"name": "s", "labels": map[string]string{"old": "1"}, "networkBlockAll": true})
	if sb.AutoStopInterval != 15 || sb.AutoArchiveInterval != 10080 || sb.AutoDeleteInterval != -1 || !sb.NetworkBlockAll {
		t.Fatalf("defaults: %+v", sb)
	}
	h.waitState(sb.ID, stateStarted)

	var labels sandboxLabels
	if st := h.call("PUT", "/sandbox/s/labels", map[string]any{"labels": map[string]string{"new": "2"}}, &labels); st != http.StatusOK || len(labels.Labels) != 1 || labels.Labels["new"] != "2" {
		t.Fatalf("labels: %d %+v", st, labels)
	}
	var got apiSandbox
	for _, c := range []struct {
		path  string
		check func() bool
	}{
		{"/autostop/0", func() bool { return got.AutoStopInterval == 0 }},
		{"/autoarchive/60", func() bool { return got.AutoArchiveInterval == 60 }},
		{"/autodelete/-1", func() bool { return got.AutoDeleteInterval == -1 }},
		{"/autodelete/30", func() bool { return got.AutoDeleteInterval == 30 }},
		{"/public/true", func() bool { return got.Public }},
	} {
		if st := h.call("POST", "/sandbox/s"+c.path, nil, &got); st != http.StatusOK || !c.check() {
			t.Fatalf("%s: %d %+v", c.path, st, got)
		}
	}
	if got, _ := h.get(sb.ID); got.Labels["new"] != "2" || got.Labels["old"] != "" || !got.Public || got.AutoDeleteInterval != 30 {
		t.Fatalf("settings not kept: %+v", got)
	}
	// Network settings: the fields sent replace the sandbox's, live.
	if st := h.call("POST", "/sandbox/s/network-settings", map[string]any{"networkBlockAll": false, "domainAllowList": "pypi.org"}, &got); st != http.StatusOK ||
		got.NetworkBlockAll || got.DomainAllowList != "pypi.org" {
		t.Fatalf("network-settings: %d %+v", st, got)
	}
	if n := eng.networkOf(sb.ID); !n.Equal(sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Domains: []string{"pypi.org"}}) {
		t.Fatalf("engine network = %+v", n)
	}
	var e apiError
	if st := h.call("POST", "/sandbox/s/network-settings", map[string]any{"networkBlockAll": true}, &e); st != http.StatusBadRequest {
		t.Fatalf("block-all with a domain list: %d %+v, want 400", st, e)
	}
	if got, _ := h.get(sb.ID); got.NetworkBlockAll {
		t.Fatal("a refused network change was recorded")
	}
	var u toolboxProxyURL
	if st := h.call("GET", "/sandbox/"+sb.ID+"/toolbox-proxy-url", nil, &u); st != http.StatusOK || u.URL != h.url+"/toolbox" {
		t.Fatalf("toolbox-proxy-url: %d %+v", st, u)
	}
}

func TestTimers(t *testing.T) {
	eng := newFakeEngine(t)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHarness(t, eng, harnessOptions{now: clock.Now})
	idle := h.create(map[string]any{"autoStopInterval": 1})
	ephemeral := h.create(map[string]any{"autoStopInterval": 0, "autoDeleteInterval": 0})
	kept := h.create(map[string]any{"autoStopInterval": 0, "autoDeleteInterval": 2})
	for _, id := range []string{idle.ID, ephemeral.ID, kept.ID} {
		h.waitState(id, stateStarted)
	}
	clock.advance(59 * time.Second)
	if got, _ := h.get(idle.ID); got.State != stateStarted {
		t.Fatalf("stopped before its interval: %q", got.State)
	}
	clock.advance(2 * time.Second)
	h.waitState(idle.ID, stateStopped)

	// An ephemeral sandbox is deleted when it stops.
	h.call("POST", "/sandbox/"+ephemeral.ID+"/stop", nil, nil)
	h.waitState(ephemeral.ID, "gone")

	h.call("POST", "/sandbox/"+kept.ID+"/stop", nil, nil)
	h.waitState(kept.ID, stateStopped)
	clock.advance(time.Minute)
	if _, st := h.get(kept.ID); st != http.StatusOK {
		t.Fatalf("deleted before its interval: %d", st)
	}
	clock.advance(61 * time.Second)
	h.waitState(kept.ID, "gone")
}

func TestBehindTheServersBack(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	a, b := h.create(map[string]any{}), h.create(map[string]any{})
	h.waitState(a.ID, stateStarted)
	h.waitState(b.ID, stateStarted)
	eng.behindBack(a.ID, false)
	if got, _ := h.get(a.ID); got.State != stateStopped {
		t.Fatalf("stopped behind its back: GET says %q", got.State)
	}
	eng.behindBack(b.ID, true)
	if _, st := h.get(b.ID); st != http.StatusNotFound {
		t.Fatalf("deleted behind its back: GET %d", st)
	}
	// It restarts.
	h.call("POST", "/sandbox/"+a.ID+"/start", nil, nil)
	h.waitState(a.ID, stateStarted)
}

func TestToolboxProxy(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"env": map[string]string{"GREETING": "hello"}})
	h.waitState(sb.ID, stateStarted)
	ctx := context.Background()
	for _, base := range []string{sb.ToolboxProxyURL + "/" + sb.ID, h.url + "/api/toolbox/" + sb.ID + "/toolbox"} {
		c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: base, Token: testKey, HTTPClient: h.client})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		res, err := c.Execute(ctx, toolbox.ExecuteRequest{Command: `echo "$GREETING from $(basename "$PWD")"`})
		if err != nil {
			t.Fatalf("%s: execute: %v", base, err)
		}
		if res.ExitCode != 0 || !strings.HasPrefix(res.Result, "hello from ") {
			t.Fatalf("%s: execute: %+v", base, res)
		}
	}
	// A session command followed over a WebSocket through the proxy.
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	run, err := c.SessionExecute(ctx, "s1", toolbox.SessionExecuteRequest{Command: "echo out; echo err >&2", RunAsync: true})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if _, err := c.FollowLogs(ctx, "s1", run.CmdID, &stdout, &stderr); err != nil {
		t.Fatalf("follow: %v", err)
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Fatalf("followed stdout %q stderr %q", stdout.String(), stderr.String())
	}
	// The WebSocket upgrade itself passes the proxy.
	wsURL := "ws" + strings.TrimPrefix(sb.ToolboxProxyURL, "http") + "/" + sb.ID + "/process/session/s1/command/" + run.CmdID + "/logs?follow=true"
	conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{
		HTTPClient: h.client,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + testKey}},
	})
	if err != nil {
		t.Fatalf("WebSocket through the proxy: %v (answer %v)", err, resp)
	}
	var got []byte
	for !strings.Contains(string(got), "out") {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("reading the log over the WebSocket: %v (so far %q)", err, got)
		}
		got = append(got, msg...)
	}
	conn.CloseNow()
	// The sandbox's preview token stands for the key, as for browsers.
	var link portPreviewURL
	h.call("GET", "/sandbox/"+sb.ID+"/ports/1234/preview-url", nil, &link)
	for _, c := range []struct {
		query, header string
		want          int
	}{
		{"", link.Token, http.StatusOK},
		{"?" + previewTokenQuery + "=" + link.Token, "", http.StatusOK},
		{"", "wrong", http.StatusUnauthorized},
		{"", "", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest("GET", sb.ToolboxProxyURL+"/"+sb.ID+"/version"+c.query, nil)
		if c.header != "" {
			req.Header.Set(previewTokenHeader, c.header)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("toolbox with query %q, header token %q: %d, want %d", c.query, c.header, resp.StatusCode, c.want)
		}
	}
	// A stopped sandbox's toolbox is not reached.
	h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	if _, err := c.Version(ctx); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("toolbox of a stopped sandbox: %v", err)
	}
}

func TestCloseWaitsForOperations(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{badRequests: true})
	release := eng.block("create")
	sb := h.create(map[string]any{})
	closed := make(chan error, 1)
	go func() { closed <- h.s.Close(context.Background()) }()
	// Once closing, the server starts nothing new.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var e apiError
		st := h.call("POST", "/sandbox", map[string]any{}, &e)
		if st == http.StatusServiceUnavailable {
			break
		}
		if st != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("create while closing: %d %+v, want 503 soon", st, e)
		}
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a create was in flight", err)
	default:
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got, _ := h.get(sb.ID); got.State != stateStarted {
		t.Fatalf("the create Close waited for: state %q", got.State)
	}
}

func TestCloseCancelsWhenItStopsWaiting(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	release := eng.block("create")
	sb := h.create(map[string]any{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.s.Close(ctx); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("Close with a done context: %v", err)
	}
	// The cancelled create stays in its transitional state, which the
	// records keep for the next server: the engine never had the
	// sandbox, so that one creates it.
	if got, _ := h.get(sb.ID); got.State != stateCreating {
		t.Fatalf("the cancelled create: state %q, want %q", got.State, stateCreating)
	}
	release()
	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	h2.waitState(sb.ID, stateStarted)
}

func TestArchive(t *testing.T) {
	eng := newFakeEngine(t)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHarness(t, eng, harnessOptions{now: clock.Now})
	sb := h.create(map[string]any{"autoStopInterval": 0, "autoArchiveInterval": 5})
	eph := h.create(map[string]any{"autoStopInterval": 0, "autoDeleteInterval": 0})
	h.waitState(sb.ID, stateStarted)
	h.waitState(eph.ID, stateStarted)
	var e apiError
	if st := h.call("POST", "/sandbox/"+sb.ID+"/archive", nil, &e); st != http.StatusBadRequest || e.Message != "Sandbox is not stopped" {
		t.Fatalf("archive a started sandbox: %d %+v", st, e)
	}
	release := eng.block("stop")
	h.call("POST", "/sandbox/"+eph.ID+"/stop", nil, nil)
	if st := h.call("POST", "/sandbox/"+eph.ID+"/archive", nil, &e); st != http.StatusConflict {
		t.Fatalf("archive while stopping: %d %+v", st, e)
	}
	release()
	h.waitState(eph.ID, "gone")

	h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	var got apiSandbox
	if st := h.call("POST", "/sandbox/"+sb.ID+"/archive", nil, &got); st != http.StatusOK || got.State != stateArchiving || got.DesiredState != stateArchived {
		t.Fatalf("archive: %d %+v", st, got)
	}
	h.waitState(sb.ID, stateArchived)
	release = eng.block("start")
	if st := h.call("POST", "/sandbox/"+sb.ID+"/start", nil, &got); st != http.StatusOK || got.State != stateRestoring {
		t.Fatalf("start an archived sandbox: %d state %q, want restoring", st, got.State)
	}
	release()
	h.waitState(sb.ID, stateStarted)

	// Archived after autoArchiveInterval stopped.
	h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	clock.advance(4 * time.Minute)
	if got, _ := h.get(sb.ID); got.State != stateStopped {
		t.Fatalf("archived before its interval: %q", got.State)
	}
	clock.advance(time.Minute)
	h.waitState(sb.ID, stateArchived)
}

// sio is a Socket.IO client of the event stream, written from the
// protocol: what the SDKs' socket.io-client sends.
type sio struct {
	t    *testing.T
	conn *websocket.Conn
}

func dialEvents(t *testing.T, h *harness) *sio {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(h.url, "http") + "/api/socket.io/?EIO=4&transport=websocket&source=sdk-test"
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: h.client})
	if err != nil {
		t.Fatalf("dialing the event stream: %v", err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	c := &sio{t: t, conn: conn}
	if open := c.read(); !strings.HasPrefix(open, `0{"`) || !strings.Contains(open, `"pingInterval"`) {
		t.Fatalf("open packet %q", open)
	}
	return c
}

func (c *sio) send(msg string) {
	c.t.Helper()
	if err := c.conn.Write(context.Background(), websocket.MessageText, []byte(msg)); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next packet, answering pings.
func (c *sio) read() string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, data, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("reading the event stream: %v", err)
		}
		if string(data) == "2" {
			c.send("3")
			continue
		}
		return string(data)
	}
}

// next returns the next event's name and data.
func (c *sio) next() (string, map[string]any) {
	c.t.Helper()
	m := c.read()
	var ev []json.RawMessage
	if !strings.HasPrefix(m, "42") || json.Unmarshal([]byte(m[2:]), &ev) != nil || len(ev) != 2 {
		c.t.Fatalf("packet %q is not an event", m)
	}
	var name string
	var data map[string]any
	if json.Unmarshal(ev[0], &name) != nil || json.Unmarshal(ev[1], &data) != nil {
		c.t.Fatalf("event %q", m)
	}
	return name, data
}

func TestEventStream(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	bad := dialEvents(t, h)
	bad.send(`40{"token":"wrong"}`)
	if m := bad.read(); !strings.HasPrefix(m, "44") || !strings.Contains(m, "Unauthorized") {
		t.Fatalf("CONNECT with a wrong key: %q, want a CONNECT_ERROR", m)
	}
	c := dialEvents(t, h)
	c.send(`40{"token":"` + testKey + `"}`)
	if m := c.read(); !strings.HasPrefix(m, `40{"sid":`) {
		t.Fatalf("CONNECT: %q", m)
	}
	sb := h.create(map[string]any{"name": "evented"})
	name, data := c.next()
	if name != eventCreated || data["id"] != sb.ID || data["state"] != stateCreating || data["toolboxProxyUrl"] != h.url+"/toolbox" {
		t.Fatalf("first event %s %v", name, data)
	}
	name, data = c.next()
	sandbox, _ := data["sandbox"].(map[string]any)
	if name != eventStateUpdated || data["oldState"] != stateCreating || data["newState"] != stateStarted || sandbox["id"] != sb.ID {
		t.Fatalf("second event %s %v", name, data)
	}
	h.call("POST", "/sandbox/evented/stop", nil, nil)
	var got []string
	for len(got) < 3 {
		name, data := c.next()
		got = append(got, fmt.Sprint(name, " ", data["oldState"], data["oldDesiredState"], "→", data["newState"], data["newDesiredState"]))
	}
	want := []string{
		"sandbox.desired-state.updated <nil>started→<nil>stopped",
		"sandbox.state.updated started<nil>→stopping<nil>",
		"sandbox.state.updated stopping<nil>→stopped<nil>",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stop's events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPreview(t *testing.T) {
	eng := newFakeEngine(t)
	eng.serveOn(8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app %s %s token=%q auth=%q", r.Host, r.URL.RequestURI(), r.Header.Get(previewTokenHeader), r.Header.Get("Authorization"))
	}))
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHarness(t, eng, harnessOptions{now: clock.Now})
	sb := h.create(map[string]any{"name": "web"})
	h.waitState(sb.ID, stateStarted)
	var link portPreviewURL
	if st := h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link); st != http.StatusOK || link.SandboxID != sb.ID || link.Token == "" {
		t.Fatalf("preview-url: %d %+v", st, link)
	}
	port := h.url[strings.LastIndex(h.url, ":")+1:]
	if want := "http://8080-" + sb.ID + ".localhost:" + port; link.URL != want {
		t.Fatalf("preview url %q, want %q", link.URL, want)
	}
	// fetch asks the server for previewURL's path, as a browser resolving
	// *.localhost to loopback would.
	fetch := func(previewURL, path string, header http.Header) (int, string) {
		t.Helper()
		u, err := url.Parse(previewURL)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", h.url+path, nil)
		req.Host = u.Host
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if st, body := fetch(link.URL, "/x", nil); st != http.StatusUnauthorized || !strings.Contains(body, previewTokenHeader) {
		t.Fatalf("preview without the token: %d %s", st, body)
	}
	if st, _ := fetch(link.URL, "/x", http.Header{previewTokenHeader: {"wrong"}}); st != http.StatusUnauthorized {
		t.Fatalf("preview with a wrong token: %d", st)
	}
	host := strings.TrimPrefix(link.URL, "http://")
	if st, body := fetch(link.URL, "/x?a=1", http.Header{previewTokenHeader: {link.Token}}); st != http.StatusOK || body != `app `+host+` /x?a=1 token="" auth=""` {
		t.Fatalf("preview with the token: %d %q", st, body)
	}
	if st, body := fetch(link.URL, "/q?"+previewTokenQuery+"="+link.Token, nil); st != http.StatusOK || !strings.HasPrefix(body, "app "+host+" /q token") {
		t.Fatalf("preview with the token in the query: %d %q", st, body)
	}
	// Public sandboxes need no token.
	h.call("POST", "/sandbox/web/public/true", nil, nil)
	if st, _ := fetch(link.URL, "/", nil); st != http.StatusOK {
		t.Fatalf("public preview: %d", st)
	}
	h.call("POST", "/sandbox/web/public/false", nil, nil)

	var signed signedPortPreviewURL
	if st := h.call("GET", "/sandbox/web/ports/8080/signed-preview-url?expiresInSeconds=30", nil, &signed); st != http.StatusOK || signed.Port != 8080 || !strings.HasPrefix(signed.URL, "http://8080-"+signed.Token+".localhost:") {
		t.Fatalf("signed-preview-url: %d %+v", st, signed)
	}
	if st, _ := fetch(signed.URL, "/s", nil); st != http.StatusOK {
		t.Fatalf("signed preview: %d", st)
	}
	other := strings.Replace(signed.URL, "8080-", "9090-", 1)
	if st, _ := fetch(other, "/s", nil); st != http.StatusUnauthorized {
		t.Fatalf("signed preview on another port: %d", st)
	}
	clock.advance(31 * time.Second)
	// 401 until the reconciler sweeps the token, then 404 (unknown).
	if st, _ := fetch(signed.URL, "/s", nil); st != http.StatusUnauthorized && st != http.StatusNotFound {
		t.Fatalf("expired signed preview: %d", st)
	}
	h.call("GET", "/sandbox/web/ports/8080/signed-preview-url", nil, &signed)
	if st := h.call("POST", "/sandbox/web/ports/8080/signed-preview-url/"+signed.Token+"/expire", nil, nil); st != http.StatusOK {
		t.Fatalf("expire: %d", st)
	}
	if st, _ := fetch(signed.URL, "/s", nil); st != http.StatusUnauthorized && st != http.StatusNotFound {
		t.Fatalf("expired signed preview: %d", st)
	}
	// Nothing listening: 502 saying so.
	var nothing portPreviewURL
	h.call("GET", "/sandbox/web/ports/9999/preview-url", nil, &nothing)
	if st, body := fetch(nothing.URL, "/", http.Header{previewTokenHeader: {nothing.Token}}); st != http.StatusBadGateway && st != http.StatusInternalServerError {
		t.Fatalf("a port nobody serves: %d %s", st, body)
	}
	// The connection to 8080 is kept for the next request, and closed
	// with the sandbox.
	if n := h.s.previews.count(sb.ID); n < 1 || n > maxIdlePreviewConns {
		t.Fatalf("open preview connections after the requests: %d, want 1 to %d kept idle", n, maxIdlePreviewConns)
	}
	h.call("DELETE", "/sandbox/web", nil, nil)
	h.waitState(sb.ID, "gone")
	if n := h.s.previews.count(sb.ID); n != 0 {
		t.Fatalf("open preview connections of a deleted sandbox: %d, want 0", n)
	}
}

// TestPreviewConnCap: a sandbox has at most so many preview connections
// open; past them a preview is 503, saying why, and once they close the
// next one passes.
func TestPreviewConnCap(t *testing.T) {
	eng := newFakeEngine(t)
	release := make(chan struct{})
	eng.serveOn(8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		fmt.Fprint(w, "ok")
	}))
	h := newHarness(t, eng, harnessOptions{})
	h.s.previews.max = 2
	sb := h.create(map[string]any{"name": "capped"})
	h.waitState(sb.ID, stateStarted)
	var link portPreviewURL
	h.call("GET", "/sandbox/capped/ports/8080/preview-url", nil, &link)
	u, err := url.Parse(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", h.url+path, nil)
		req.Host = u.Host
		req.Header.Set(previewTokenHeader, link.Token)
		resp, err := h.client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	held := make(chan int, 2)
	for range 2 {
		go func() { st, _ := get("/hold"); held <- st }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.s.previews.count(sb.ID) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the two held previews have %d connections", h.s.previews.count(sb.ID))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st, body := get("/third"); st != http.StatusServiceUnavailable || !strings.Contains(body, "open preview connections") {
		t.Errorf("a preview past the cap: %d %s, want 503 saying why", st, body)
	}
	close(release)
	for range 2 {
		if st := <-held; st != http.StatusOK {
			t.Errorf("a held preview: %d", st)
		}
	}
	if st, body := get("/after"); st != http.StatusOK || body != "ok" {
		t.Errorf("a preview once the held ones ended: %d %s", st, body)
	}
}

func TestConcurrentCreatesOfOneName(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	const n = 8
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sb apiSandbox
			statuses <- h.call("POST", "/sandbox", map[string]any{"name": "one"}, &sb)
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for st := range statuses {
		count[st]++
	}
	if count[http.StatusOK] != 1 || count[http.StatusConflict] != n-1 {
		t.Fatalf("statuses %v, want one 200 and %d 409", count, n-1)
	}
	sb := h.waitState("one", stateStarted)
	var list listSandboxes
	if h.call("GET", "/sandbox", nil, &list); len(list.Items) != 1 || list.Items[0].ID != sb.ID {
		t.Fatalf("listed %d sandboxes", len(list.Items))
	}
	if c := eng.called("create"); c != 1 {
		t.Fatalf("engine created %d sandboxes, want 1", c)
	}
}

func TestVolumes(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	var vol volumeDTO
	if st := h.call("POST", "/volumes", map[string]string{"name": "data"}, &vol); st != http.StatusOK || vol.Name != "data" || vol.State != "ready" || !strings.HasPrefix(vol.ID, volumeIDPrefix) {
		t.Fatalf("create volume: %d %+v", st, vol)
	}
	var e apiError
	if st := h.call("POST", "/volumes", map[string]string{"name": "data"}, &e); st != http.StatusConflict {
		t.Fatalf("second volume of a name: %d %+v", st, e)
	}
	if st := h.call("POST", "/volumes", map[string]string{"name": "../x"}, &e); st != http.StatusBadRequest {
		t.Fatalf("volume named ../x: %d %+v", st, e)
	}
	var got volumeDTO
	if st := h.call("GET", "/volumes/by-name/data", nil, &got); st != http.StatusOK || got.ID != vol.ID {
		t.Fatalf("by name: %d %+v", st, got)
	}
	if st := h.call("GET", "/volumes/"+vol.ID, nil, &got); st != http.StatusOK || got.Name != "data" {
		t.Fatalf("by id: %d %+v", st, got)
	}
	if st := h.call("GET", "/volumes/by-name/none", nil, &e); st != http.StatusNotFound {
		t.Fatalf("unknown volume: %d", st)
	}
	if st := h.call("POST", "/sandbox", map[string]any{"volumes": []map[string]string{{"volumeId": "none", "mountPath": "/data"}}}, &e); st != http.StatusBadRequest || !strings.Contains(e.Message, "none") {
		t.Fatalf("create with an unknown volume: %d %+v", st, e)
	}
	sb := h.create(map[string]any{"name": "user", "volumes": []map[string]string{{"volumeId": "data", "mountPath": "/data"}}})
	if len(sb.Volumes) != 1 || sb.Volumes[0].VolumeID != vol.ID || sb.Volumes[0].MountPath != "/data" {
		t.Fatalf("sandbox volumes %+v, want the volume's id", sb.Volumes)
	}
	h.waitState(sb.ID, stateStarted)
	if m := eng.mounts(sb.ID); len(m) != 1 || m[0].VolumeID != vol.ID {
		t.Fatalf("engine mounts %+v, want the volume's id (not the operator's volume of its name)", m)
	}
	if st := h.call("DELETE", "/volumes/"+vol.ID, nil, &e); st != http.StatusConflict || !strings.Contains(e.Message, "user") {
		t.Fatalf("delete a volume in use: %d %+v", st, e)
	}
	h.call("DELETE", "/sandbox/user", nil, nil)
	h.waitState(sb.ID, "gone")
	if st := h.call("DELETE", "/volumes/"+vol.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("delete: %d", st)
	}
	var list []volumeDTO
	if st := h.call("GET", "/volumes", nil, &list); st != http.StatusOK || len(list) != 0 {
		t.Fatalf("volumes after delete: %d %+v", st, list)
	}
	if n := eng.called("removeVolume " + vol.ID); n != 1 {
		t.Fatalf("engine removed the volume %d times", n)
	}
}

// Signed preview tokens are forgotten once they expire: the reconciler
// sweeps the table, so tokens nobody uses again do not pile up.
func TestSignedPreviewSwept(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHarness(t, newFakeEngine(t), harnessOptions{now: clock.Now})
	sb := h.create(map[string]any{"name": "web"})
	h.waitState(sb.ID, stateStarted)
	var short, long signedPortPreviewURL
	h.call("GET", "/sandbox/web/ports/8080/signed-preview-url?expiresInSeconds=30", nil, &short)
	h.call("GET", "/sandbox/web/ports/8080/signed-preview-url?expiresInSeconds=3600", nil, &long)
	has := func(token string) bool {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		_, ok := h.s.signed[token]
		return ok
	}
	if !has(short.Token) || !has(long.Token) {
		t.Fatal("signed tokens not in the table")
	}
	clock.advance(31 * time.Second)
	for deadline := time.Now().Add(10 * time.Second); has(short.Token); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an expired signed token is still in the table after 10 s of sweeps")
		}
	}
	if !has(long.Token) {
		t.Fatal("a live signed token was swept")
	}
}

// A sandbox has at most maxSignedPerSandbox live signed preview URLs: the
// next is 429 until one is expired; another sandbox is not affected.
func TestSignedPreviewCap(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{badRequests: true})
	for _, name := range []string{"one", "two"} {
		h.waitState(h.create(map[string]any{"name": name}).ID, stateStarted)
	}
	var first, sp signedPortPreviewURL
	for i := range maxSignedPerSandbox {
		if st := h.call("GET", "/sandbox/one/ports/8080/signed-preview-url?expiresInSeconds=3600", nil, &sp); st != http.StatusOK {
			t.Fatalf("signed URL %d: %d", i+1, st)
		}
		if i == 0 {
			first = sp
		}
	}
	var e apiError
	if st := h.call("GET", "/sandbox/one/ports/8080/signed-preview-url", nil, &e); st != http.StatusTooManyRequests || !strings.Contains(e.Message, "expire") {
		t.Fatalf("signed URL past the cap: %d %+v, want 429", st, e)
	}
	if st := h.call("GET", "/sandbox/two/ports/8080/signed-preview-url", nil, &sp); st != http.StatusOK {
		t.Fatalf("another sandbox's signed URL: %d", st)
	}
	h.call("POST", "/sandbox/one/ports/8080/signed-preview-url/"+first.Token+"/expire", nil, nil)
	if st := h.call("GET", "/sandbox/one/ports/8080/signed-preview-url", nil, &sp); st != http.StatusOK {
		t.Fatalf("a signed URL once one was expired: %d", st)
	}
}
