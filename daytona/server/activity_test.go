package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// activity returns the page of sandbox id's trail query asks for, with
// key; it fails the test unless the answer is 200.
func (h *harness) activity(key, id, query string) activityPage {
	h.t.Helper()
	var p activityPage
	if st := h.callKey(key, "GET", "/sandbox/"+id+"/activity?"+query, nil, &p); st != http.StatusOK {
		h.t.Fatalf("activity of %s?%s: %d", id, query, st)
	}
	return p
}

// toolboxClient returns a toolbox client of sandbox sb through h's proxy
// with key.
func (h *harness) toolboxClient(sb apiSandbox, key string) *toolbox.Client {
	h.t.Helper()
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: key, HTTPClient: h.client})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// waitActivity polls the trail of id (kind, "" for all) until it holds n
// entries: entries are written after the answers that made them.
func (h *harness) waitActivity(id, kind string, n int) activityPage {
	h.t.Helper()
	q := "limit=200"
	if kind != "" {
		q += "&kind=" + kind
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := h.activity(testKey, id, q)
		if p.Total >= n {
			return p
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("activity of %s (kind %q): %d entries %+v, want %d", id, kind, p.Total, p.Items, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Commands run through the toolbox proxy are in the trail, newest first:
// their text (credentials redacted), exit code, duration, who ran them
// (the key's name, or its organization), and for session commands the
// session and the command's id. A command's output passes unchanged.
func TestActivityCommands(t *testing.T) {
	dir := t.TempDir()
	named := newOrgKey(t, dir, "ci-bot", DefaultOrganizationID)
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir})
	sb := h.create(map[string]any{"env": map[string]string{"API_TOKEN": "tok-0123456789"}})
	h.waitState(sb.ID, stateStarted)
	ctx := context.Background()
	c := h.toolboxClient(sb, testKey)
	res, err := c.Execute(ctx, toolbox.ExecuteRequest{Command: "echo hi; exit 3"})
	if err != nil || res.ExitCode != 3 || res.Result != "hi\n" {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	// A large output streams through whole.
	const big = 3 << 20
	res, err = c.Execute(ctx, toolbox.ExecuteRequest{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", big)})
	if err != nil || res.ExitCode != 0 || len(res.Result) != big || strings.Trim(res.Result, "a") != "" {
		t.Fatalf("execute with %d bytes of output: exit %v, %d bytes, %v", big, res.ExitCode, len(res.Result), err)
	}
	nc := h.toolboxClient(sb, named)
	if _, err := nc.Execute(ctx, toolbox.ExecuteRequest{Command: "echo https://bob:pa55word@example.com tok-0123456789"}); err != nil {
		t.Fatal(err)
	}
	if err := nc.CreateSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	sync1, err := nc.SessionExecute(ctx, "s1", toolbox.SessionExecuteRequest{Command: "false"})
	if err != nil || sync1.ExitCode == nil || *sync1.ExitCode != 1 {
		t.Fatalf("session exec: %+v, %v", sync1, err)
	}
	async, err := nc.SessionExecute(ctx, "s1", toolbox.SessionExecuteRequest{Command: "sleep 60", RunAsync: true})
	if err != nil {
		t.Fatal(err)
	}
	p := h.waitActivity(sb.ID, activityCommand, 5)
	if p.Total != 5 || len(p.Items) != 5 {
		t.Fatalf("%d command entries %+v, want 5", p.Total, p.Items)
	}
	type want struct {
		command, actor, session, cmdID string
		exit                           int // -1: none
		timed                          bool
	}
	wants := []want{
		{"sleep 60", "ci-bot", "s1", async.CmdID, -1, false},
		{"false", "ci-bot", "s1", sync1.CmdID, 1, true},
		{"echo https://REDACTED@example.com REDACTED", "ci-bot", "", "", 0, true},
		{fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", big), DefaultOrganizationID, "", "", 0, true},
		{"echo hi; exit 3", DefaultOrganizationID, "", "", 3, true},
	}
	for i, w := range wants {
		e := p.Items[i]
		exit := -1
		if e.ExitCode != nil {
			exit = *e.ExitCode
		}
		if e.Kind != activityCommand || e.Command != w.command || e.Actor != w.actor || e.SessionID != w.session || e.CommandID != w.cmdID || exit != w.exit || (e.DurationMs > 0) != w.timed {
			t.Errorf("entry %d: %+v (exit %d), want %+v", i, e, exit, w)
		}
		if e.Time.IsZero() || e.ID == "" {
			t.Errorf("entry %d has no time or id: %+v", i, e)
		}
	}
	if p.Items[0].Reason != reasonBackground {
		t.Errorf("async entry's reason %q", p.Items[0].Reason)
	}
	// A background command's exit code, which the proxy does not see,
	// is in once it has ended: the trail asks the toolbox when read.
	if err := nc.CreateSession(ctx, "s2"); err != nil { // s1 is busy with sleep 60
		t.Fatal(err)
	}
	quick, err := nc.SessionExecute(ctx, "s2", toolbox.SessionExecuteRequest{Command: "sh -c 'exit 4'", RunAsync: true})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		e := h.activity(testKey, sb.ID, "kind=command&limit=1").Items[0]
		if e.CommandID == quick.CmdID && e.ExitCode != nil && *e.ExitCode == 4 && e.Reason == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background command's entry: %+v, want exit code 4", e)
		}
	}
	// Written back: the trail has it without asking again.
	if err := h.s.store.update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if p, _ := h.s.store.activityPage(sb.ID, activityCommand, 1, 1); p.Items[0].ExitCode == nil || *p.Items[0].ExitCode != 4 {
		t.Errorf("the stored entry: %+v", p.Items)
	}
	if err := nc.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	// A refused command says so.
	if _, err := c.Execute(ctx, toolbox.ExecuteRequest{Command: "sleep 5", Timeout: 1}); err == nil {
		t.Fatal("a command past its timeout did not fail")
	}
	p = h.waitActivity(sb.ID, activityCommand, 7)
	if e := p.Items[0]; e.Command != "sleep 5" || e.ExitCode != nil || !strings.Contains(e.Reason, "408") {
		t.Errorf("timed-out command: %+v", e)
	}
	// The background command whose session was deleted says so.
	for _, e := range p.Items {
		if e.CommandID == async.CmdID && (e.ExitCode != nil || !strings.Contains(e.Reason, "session ended")) {
			t.Errorf("the command of a deleted session: %+v", e)
		}
	}
}

// Files uploaded through the proxy (bulk, v1 and v2 multipart) are in
// the trail with their paths and sizes; a refused upload is not.
func TestActivityUploads(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	sb := h.create(map[string]any{})
	h.waitState(sb.ID, stateStarted)
	ctx := context.Background()
	c := h.toolboxClient(sb, testKey)
	err := c.Upload(ctx,
		toolbox.UploadFile{Path: "/tmp/a.txt", Content: strings.NewReader("hello")},
		toolbox.UploadFile{Path: "/tmp/b.bin", Content: bytes.NewReader(make([]byte, 100000))})
	if err != nil {
		t.Fatal(err)
	}
	base := sb.ToolboxProxyURL + "/" + sb.ID
	// v1: multipart field "file", path in the query.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "c.txt")
	fw.Write([]byte("twelve bytes"))
	mw.Close()
	post := func(route, path, ctype string, b io.Reader) int {
		req, _ := http.NewRequest("POST", base+route+"?path="+url.QueryEscape(path), b)
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", ctype)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("/files/upload", "/tmp/c.txt", mw.FormDataContentType(), &body); st != http.StatusOK {
		t.Fatalf("upload v1: %d", st)
	}
	form := func(content string) (string, io.Reader) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		fw, _ := mw.CreateFormFile("file", "f")
		fw.Write([]byte(content))
		mw.Close()
		return mw.FormDataContentType(), &b
	}
	ct, b := form("seven b")
	if st := post("/files/upload-v2", "/tmp/d.txt", ct, b); st != http.StatusOK {
		t.Fatalf("upload v2: %d", st)
	}
	// Refused (a folder's path): no entry.
	ct, b = form("x")
	if st := post("/files/upload-v2", "/tmp", ct, b); st < 400 {
		t.Fatalf("upload over /tmp: %d", st)
	}
	p := h.waitActivity(sb.ID, activityFile, 4)
	got := map[string]int64{}
	for _, e := range p.Items {
		if e.Actor != DefaultOrganizationID || e.Kind != activityFile {
			t.Errorf("file entry %+v", e)
		}
		got[e.Path] = e.Bytes
	}
	want := map[string]int64{"/tmp/a.txt": 5, "/tmp/b.bin": 100000, "/tmp/c.txt": 12, "/tmp/d.txt": 7}
	if len(got) != len(want) || p.Total != 4 {
		t.Fatalf("file entries %v (total %d), want %v", got, p.Total, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("file %s: %d bytes, want %d", k, got[k], v)
		}
	}
	// The file arrived whole.
	rc, err := c.Download(ctx, "/tmp/b.bin")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, rc)
	rc.Close()
	if n != 100000 {
		t.Fatalf("downloaded %d bytes", n)
	}
}

// Lifecycle calls are in the trail with who made them; a fork is in its
// source's trail and its own; a deleted sandbox's trail goes with it.
func TestActivityLifecycle(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	sb := h.create(map[string]any{"name": "life"})
	h.waitState(sb.ID, stateStarted)
	for _, step := range []struct{ call, state string }{{"stop", stateStopped}, {"start", stateStarted}} {
		if st := h.call("POST", "/sandbox/life/"+step.call, nil, nil); st != http.StatusOK {
			t.Fatalf("%s: %d", step.call, st)
		}
		h.waitState(sb.ID, step.state)
	}
	var fork apiSandbox
	if st := h.call("POST", "/sandbox/"+sb.ID+"/fork", map[string]string{"name": "life-2"}, &fork); st != http.StatusOK {
		t.Fatalf("fork: %d", st)
	}
	h.waitState(fork.ID, stateStarted)
	// A refused call is not in the trail.
	if st := h.call("POST", "/sandbox/life/archive", nil, nil); st != http.StatusBadRequest {
		t.Fatalf("archive of a started sandbox: %d", st)
	}
	p := h.waitActivity(sb.ID, activityLifecycle, 4)
	var actions []string
	for _, e := range p.Items {
		actions = append(actions, e.Action)
		if e.Actor != DefaultOrganizationID || e.Kind != activityLifecycle {
			t.Errorf("lifecycle entry %+v", e)
		}
	}
	if got := strings.Join(actions, ","); got != "fork,start,stop,create" || p.Items[0].Reason != "forked to life-2" {
		t.Errorf("lifecycle of the source: %s (%+v), want fork,start,stop,create", got, p.Items)
	}
	fp := h.waitActivity(fork.ID, activityLifecycle, 1)
	if e := fp.Items[0]; e.Action != "create" || e.Reason != "forked from "+sb.ID {
		t.Errorf("lifecycle of the fork: %+v", fp.Items)
	}
	if st := h.call("DELETE", "/sandbox/"+fork.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("delete: %d", st)
	}
	h.waitState(fork.ID, "gone")
	if st := h.call("GET", "/sandbox/"+fork.ID+"/activity", nil, nil); st != http.StatusNotFound {
		t.Errorf("activity of a deleted sandbox: %d, want 404", st)
	}
	// Its trail is gone from the records (its removal is queued after
	// the entries: wait for a write queued later).
	if err := h.s.store.update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if p, err := h.s.store.activityPage(fork.ID, "", 1, 10); err != nil || p.Total != 0 {
		t.Errorf("the deleted fork's trail: %+v, %v", p, err)
	}
}

// Pages are newest first, limit entries each, with the total and the
// count of pages; kind keeps one kind; bad queries are 400 saying what is
// wrong; another organization's sandbox is 404, no key 401.
func TestActivityPages(t *testing.T) {
	dir := t.TempDir()
	other := newOrgKey(t, dir, "other", "org-b")
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir, badRequests: true})
	sb := h.create(map[string]any{"name": "paged"})
	h.waitState(sb.ID, stateStarted)
	c := h.toolboxClient(sb, testKey)
	for i := range 7 {
		if _, err := c.Execute(context.Background(), toolbox.ExecuteRequest{Command: fmt.Sprintf("echo %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitActivity(sb.ID, activityCommand, 7)
	all := h.activity(testKey, "paged", "")
	if all.Total != 8 || all.TotalPages != 1 || all.Page != 1 || len(all.Items) != 8 {
		t.Fatalf("all: total %d, pages %d, page %d, %d items; want 8 (7 commands and a create)", all.Total, all.TotalPages, all.Page, len(all.Items))
	}
	var got []string
	for page := 1; page <= 3; page++ {
		p := h.activity(testKey, sb.ID, fmt.Sprintf("kind=command&limit=3&page=%d", page))
		if p.Total != 7 || p.TotalPages != 3 || p.Page != page {
			t.Fatalf("page %d: total %d, pages %d, page %d", page, p.Total, p.TotalPages, p.Page)
		}
		for _, e := range p.Items {
			got = append(got, e.Command)
		}
	}
	if strings.Join(got, ",") != "echo 6,echo 5,echo 4,echo 3,echo 2,echo 1,echo 0" {
		t.Errorf("commands over 3 pages: %q", got)
	}
	// Without a kind the pages are read by position.
	p2 := h.activity(testKey, sb.ID, "limit=5&page=2")
	if len(p2.Items) != 3 || p2.Items[0].Command != "echo 1" || p2.Items[2].Action != "create" || p2.TotalPages != 2 {
		t.Errorf("page 2 of 5 of all: %+v", p2)
	}
	if p := h.activity(testKey, sb.ID, "page=9"); len(p.Items) != 0 || p.Total != 8 {
		t.Errorf("a page past the end: %+v", p)
	}
	if p := h.activity(testKey, sb.ID, "kind=network"); p.Total != 0 || p.Items == nil {
		t.Errorf("no refusals: %+v (items must be [], not null)", p)
	}
	for q, msg := range map[string]string{
		"page=0": "page must be", "page=x": "page must be", "limit=201": "limit must be", "limit=0": "limit must be",
		"kind=shell": "kind must be one of",
	} {
		var e apiError
		if st := h.call("GET", "/sandbox/"+sb.ID+"/activity?"+q, nil, &e); st != http.StatusBadRequest || !strings.Contains(e.Message, msg) {
			t.Errorf("?%s: %d %q, want 400 with %q", q, st, e.Message, msg)
		}
	}
	if st := h.callKey(other, "GET", "/sandbox/"+sb.ID+"/activity", nil, nil); st != http.StatusNotFound {
		t.Errorf("another organization's sandbox: %d, want 404", st)
	}
	if st := h.callKey(other, "GET", "/sandbox/paged/activity", nil, nil); st != http.StatusNotFound {
		t.Errorf("another organization's sandbox by name: %d, want 404", st)
	}
	if st := h.callKey("", "GET", "/sandbox/"+sb.ID+"/activity", nil, nil); st != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", st)
	}
}

// The trail is kept across a restart of the server.
func TestActivitySurvivesARestart(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{})
	h.waitState(sb.ID, stateStarted)
	if _, err := h.toolboxClient(sb, testKey).Execute(context.Background(), toolbox.ExecuteRequest{Command: "exit 7"}); err != nil {
		t.Fatal(err)
	}
	h.waitActivity(sb.ID, activityCommand, 1)
	// An entry queued just before Close: Close commits what is queued.
	h.s.trail(sb.ID, activityEntry{Time: time.Now(), Kind: activityLifecycle, Actor: "test", Action: "queued"})
	closeServer(t, h)
	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	p := h2.activity(testKey, sb.ID, "")
	if p.Total != 3 || p.Items[0].Action != "queued" || p.Items[1].Command != "exit 7" || p.Items[1].ExitCode == nil || *p.Items[1].ExitCode != 7 || p.Items[2].Action != "create" {
		t.Fatalf("after a restart: %+v", p)
	}
}

// A sandbox's trail keeps its last maxTrail entries.
func TestActivityBounded(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	sb := h.create(map[string]any{})
	h.waitState(sb.ID, stateStarted)
	if err := h.s.store.flushTrail().wait(); err != nil { // the create's entry first
		t.Fatal(err)
	}
	entries := make([]activityEntry, maxTrail+50)
	for i := range entries {
		entries[i] = activityEntry{Time: time.Now(), Kind: activityCommand, Command: fmt.Sprint(i)}
	}
	if err := h.s.store.appendActivity(sb.ID, entries, nil).wait(); err != nil {
		t.Fatal(err)
	}
	if err := h.s.store.appendActivity(sb.ID, entries[:1], nil).wait(); err != nil {
		t.Fatal(err)
	}
	p := h.activity(testKey, sb.ID, fmt.Sprintf("limit=200&page=%d", maxTrail/200))
	if p.Total != maxTrail || p.TotalPages != maxTrail/200 {
		t.Fatalf("total %d, pages %d; want %d entries", p.Total, p.TotalPages, maxTrail)
	}
	// The oldest kept is entry 51 of the big append (the create and 50
	// more were dropped); the newest is the last append.
	if last := p.Items[len(p.Items)-1]; last.Command != "51" {
		t.Errorf("oldest kept entry %+v, want command 51", last)
	}
	if first := h.activity(testKey, sb.ID, "limit=1").Items[0]; first.Command != "0" {
		t.Errorf("newest entry %+v", first)
	}
	if kinds := h.activity(testKey, sb.ID, "kind=command&limit=1"); kinds.Total != maxTrail {
		t.Errorf("commands: %d, want %d", kinds.Total, maxTrail)
	}
}

// refusingEngine is a fakeEngine whose sandboxes have a policy log.
type refusingEngine struct {
	*fakeEngine
	mu  sync.Mutex
	log []sandbox.NetworkRefusal
}

func (e *refusingEngine) policyLog(context.Context, string) ([]sandbox.NetworkRefusal, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sandbox.NetworkRefusal(nil), e.log...), nil
}

func (e *refusingEngine) refuse(r sandbox.NetworkRefusal) {
	e.mu.Lock()
	e.log = append(e.log, r)
	e.mu.Unlock()
}

// The policy log's refusals are in the trail once each, however often it
// is read.
func TestActivityRefusals(t *testing.T) {
	eng := &refusingEngine{fakeEngine: newFakeEngine(t)}
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{})
	h.waitState(sb.ID, stateStarted)
	t0 := time.Now().Add(-time.Minute).UTC()
	eng.refuse(sandbox.NetworkRefusal{Time: t0, Protocol: "connect", Host: "10.0.0.1", Port: 22, Reason: "private address"})
	eng.refuse(sandbox.NetworkRefusal{Time: t0.Add(time.Second), Protocol: "http", Host: "evil.example", Port: 80, Reason: "not in the domain allow list"})
	for range 3 {
		h.activity(testKey, sb.ID, "")
	}
	eng.refuse(sandbox.NetworkRefusal{Time: t0.Add(2 * time.Second), Protocol: "tls", Host: "x.example", Port: 443, Reason: "not in the domain allow list"})
	p := h.activity(testKey, sb.ID, "kind=network")
	if p.Total != 3 {
		t.Fatalf("%d refusals %+v, want 3", p.Total, p.Items)
	}
	if e := p.Items[0]; e.Destination != "x.example:443" || e.Actor != "sandbox" || e.Reason != "not in the domain allow list (tls)" || !e.Time.Equal(t0.Add(2*time.Second)) {
		t.Errorf("newest refusal %+v", e)
	}
	if e := p.Items[2]; e.Destination != "10.0.0.1:22" {
		t.Errorf("oldest refusal %+v", e)
	}
}

// jsonFields picks the wanted top-level fields whatever the chunks the
// bytes come in, skips nested values and other strings, and keeps at
// most the bytes asked for.
func TestJSONFields(t *testing.T) {
	doc := `{"result":"a \"quoted\" {not} [json] \\","nested":{"exitCode":9,"command":"no"},"list":[1,{"a":"b"}],` +
		`"command":"echo \"hi\" \u00e9 \\n","exitCode" : -2 ,"cmdId":null,"runAsync":true}`
	for _, chunk := range []int{1, 3, 7, len(doc)} {
		j := newJSONFields(map[string]int{"command": 100, "exitCode": 8, "cmdId": 10, "runAsync": 5})
		for s := doc; s != ""; {
			n := min(chunk, len(s))
			j.Write([]byte(s[:n]))
			s = s[n:]
		}
		cmd, cut, ok := j.text("command")
		code, codeOK := j.integer("exitCode")
		if cmd != `echo "hi" é \n` || cut || !ok || code != -2 || !codeOK || !j.boolean("runAsync") {
			t.Errorf("chunks of %d: command %q (cut %v, ok %v), exitCode %d (%v), runAsync %v", chunk, cmd, cut, ok, code, codeOK, j.boolean("runAsync"))
		}
		if _, ok := j.integer("cmdId"); ok {
			t.Errorf("chunks of %d: a null cmdId read as an integer", chunk)
		}
	}
	// Cut short, in the middle of an escape.
	j := newJSONFields(map[string]int{"command": 6})
	j.Write([]byte(`{"command":"abcd\u00e9f"}`))
	if cmd, cut, ok := j.text("command"); cmd != "abcd" || !cut || !ok {
		t.Errorf("cut command %q, %v, %v", cmd, cut, ok)
	}
	// Not JSON: nothing.
	j = newJSONFields(map[string]int{"command": 6})
	j.Write([]byte(`["command","x"]`))
	if _, _, ok := j.text("command"); ok {
		t.Error("a value read out of an array")
	}
}

// A session command sent with the sandbox's preview token (as a browser
// does), answered in JSON (no agentbox extension asked for): the trail
// names the token as who ran it, with the JSON answer's exit code.
func TestActivityPreviewToken(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	sb := h.create(map[string]any{})
	h.waitState(sb.ID, stateStarted)
	if err := h.toolboxClient(sb, testKey).CreateSession(context.Background(), "web"); err != nil {
		t.Fatal(err)
	}
	var link portPreviewURL
	h.call("GET", "/sandbox/"+sb.ID+"/ports/1234/preview-url", nil, &link)
	req, _ := http.NewRequest("POST", sb.ToolboxProxyURL+"/"+sb.ID+"/process/session/web/exec", strings.NewReader(`{"command":"sh -c 'exit 2'"}`))
	req.Header.Set(previewTokenHeader, link.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer toolbox.SessionExecuteResponse
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || answer.ExitCode == nil || *answer.ExitCode != 2 || resp.Header.Get("Content-Type") == toolbox.ContentTypeBinary {
		t.Fatalf("exec: %d %+v, %v", resp.StatusCode, answer, err)
	}
	p := h.waitActivity(sb.ID, activityCommand, 1)
	if e := p.Items[0]; e.Actor != "preview token" || e.Command != "sh -c 'exit 2'" || e.ExitCode == nil || *e.ExitCode != 2 || e.SessionID != "web" || e.CommandID != answer.CmdID {
		t.Errorf("entry %+v, want the preview token's command, exit 2, command %s", e, answer.CmdID)
	}
}
