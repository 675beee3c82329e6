package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// send sends method url (absolute path under h.url) with the test key,
// headers hdr and a JSON body, and returns the answer, its body read.
func (h *harness) send(method, path string, hdr map[string]string, body any) (*http.Response, []byte, error) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, data, err
}

// status sends a GET of path with headers hdr and returns its status.
func (h *harness) status(path string, hdr map[string]string) int {
	h.t.Helper()
	resp, _, err := h.send("GET", path, hdr, nil)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode
}

func TestKnobsOffByDefault(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	hdr := map[string]string{HeaderTestFault: "503", HeaderTestLatency: "1h"}
	if st := h.status("/api/config", hdr); st != http.StatusOK {
		t.Fatalf("with test headers and no knobs: status %d, want 200", st)
	}
	if c := h.s.RequestCounts(""); c != nil {
		t.Fatalf("counts without knobs: %v", c)
	}
	if err := h.s.InjectFault(Fault{Kind: "503"}); err == nil {
		t.Fatal("InjectFault without knobs: no error")
	}
	// Knobs without Headers ignore the headers too.
	h = newHarness(t, newFakeEngine(t), harnessOptions{knobs: &Knobs{}})
	if st := h.status("/api/config", hdr); st != http.StatusOK {
		t.Fatalf("with test headers and Knobs.Headers off: status %d, want 200", st)
	}
}

func TestKnobsFaultHeader(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{knobs: &Knobs{Headers: true}})
	hdr := map[string]string{HeaderTestFault: "503;times=2;key=a"}
	var got []int
	for range 3 {
		got = append(got, h.status("/api/config", hdr))
	}
	if want := []int{503, 503, 200}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	resp, body, err := h.send("GET", "/api/config", map[string]string{HeaderTestFault: "429;retry-after=2;key=b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != 429 || e.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("429 fault: status %d, Retry-After %q, body %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if st := h.status("/api/config", map[string]string{HeaderTestFault: "bogus"}); st != http.StatusBadRequest {
		t.Fatalf("unknown fault kind: status %d, want 400", st)
	}
	if st := h.status("/api/config", map[string]string{HeaderTestLatency: "soon"}); st != http.StatusBadRequest {
		t.Fatalf("malformed latency: status %d, want 400", st)
	}
}

func TestKnobsServerFaultsAndLatency(t *testing.T) {
	const delay = 30 * time.Millisecond
	h := newHarness(t, newFakeEngine(t), harnessOptions{knobs: &Knobs{
		Latency: delay,
		Faults:  []Fault{{Kind: "502", Method: "GET", Path: "/api/volumes", Times: 1}},
	}})
	if st := h.status("/api/volumes", nil); st != http.StatusBadGateway {
		t.Fatalf("first GET /api/volumes: %d, want 502", st)
	}
	if st := h.status("/api/volumes", nil); st != http.StatusOK {
		t.Fatalf("second GET /api/volumes: %d, want 200", st)
	}
	if err := h.s.InjectFault(Fault{Kind: "500", Path: "/api/config", Times: 1}); err != nil {
		t.Fatal(err)
	}
	if st := h.status("/api/config", nil); st != http.StatusInternalServerError {
		t.Fatalf("after InjectFault: %d, want 500", st)
	}
	if err := h.s.InjectFault(Fault{Kind: "404"}); err == nil {
		t.Fatal("InjectFault of a 404: no error")
	}
	begin := time.Now()
	h.status("/api/config", nil)
	if d := time.Since(begin); d < delay {
		t.Fatalf("a request took %v with %v of injected latency", d, delay)
	}
}

func TestKnobsReset(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{knobs: &Knobs{Headers: true}})
	_, _, err := h.send("GET", "/api/config", map[string]string{HeaderTestFault: "reset"}, nil)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reset fault: error %v, want a connection reset", err)
	}
}

// startedSandbox creates a sandbox through h and waits for it to start.
func startedSandbox(h *harness, hdr map[string]string) apiSandbox {
	h.t.Helper()
	resp, body, err := h.send("POST", "/api/sandbox", hdr, map[string]any{})
	if err != nil || resp.StatusCode != http.StatusOK {
		h.t.Fatalf("create: %v %s", err, body)
	}
	var sb apiSandbox
	if err := json.Unmarshal(body, &sb); err != nil {
		h.t.Fatal(err)
	}
	return h.waitState(sb.ID, stateStarted)
}

func TestKnobsBehindBackAndCounts(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{knobs: &Knobs{Headers: true, CountRequests: true}})
	sb := startedSandbox(h, nil)
	h.s.ResetRequestCounts()
	for range 2 {
		if st := h.status("/toolbox/"+sb.ID+"/version", nil); st != http.StatusOK {
			t.Fatalf("toolbox version: %d", st)
		}
	}
	got, st := h.get(sb.Name)
	if st != http.StatusOK || got.State != stateStarted {
		t.Fatalf("get: %d %s", st, got.State)
	}
	want := RouteCount{"GET /toolbox/{id}/version": 2, "GET /api/sandbox/{id}": 1}
	if c := h.s.RequestCounts(sb.ID); !maps.Equal(c, want) || c.Total() != 3 {
		t.Fatalf("counts %v, want %v", c, want)
	}
	// Stopped behind the client's back: the request sees it stopped.
	resp, body, err := h.send("GET", "/api/sandbox/"+sb.ID, map[string]string{HeaderTestFault: "stop"}, nil)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"stopped"`) {
		t.Fatalf("stop fault: %v %s", err, body)
	}
	if st := h.status("/toolbox/"+sb.ID+"/version", nil); st < 400 {
		t.Fatalf("toolbox of a sandbox stopped behind the back: %d", st)
	}
	// Deleted behind its back: gone.
	if st := h.status("/api/sandbox/"+sb.ID, map[string]string{HeaderTestFault: "delete"}); st != http.StatusNotFound {
		t.Fatalf("delete fault: %d, want 404", st)
	}
}

func TestKnobsWebSocketDropAndDaytonaToolbox(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{knobs: &Knobs{Headers: true}})
	plain := startedSandbox(h, nil)
	dt := startedSandbox(h, map[string]string{HeaderTestToolbox: "daytona"})
	for _, c := range []struct {
		sb   apiSandbox
		want bool
	}{{plain, true}, {dt, false}} {
		resp, _, err := h.send("GET", "/toolbox/"+c.sb.ID+"/version", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get(toolbox.HeaderExtensions) != ""; got != c.want {
			t.Errorf("sandbox %s advertises extensions: %v, want %v", c.sb.ID, got, c.want)
		}
	}
	base := "/toolbox/" + plain.ID + "/process/session"
	if resp, body, err := h.send("POST", base, nil, map[string]string{"sessionId": "drop"}); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("create session: %v %s", err, body)
	}
	resp, body, err := h.send("POST", base+"/drop/exec", nil, map[string]any{"command": "echo first; sleep 30; echo second", "runAsync": true})
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("exec: %v %s", err, body)
	}
	var ex struct{ CmdID string }
	if err := json.Unmarshal(body, &ex); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(h.url, "http") + base + "/drop/command/" + ex.CmdID + "/logs?follow=true"
	hdr := http.Header{"Authorization": {"Bearer " + testKey}, HeaderTestFault: {"websocket-drop"}}
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_, msg, err := conn.Read(ctx)
	if err != nil || !strings.Contains(string(msg), "first") {
		t.Fatalf("first message: %q, %v", msg, err)
	}
	_, msg, err = conn.Read(ctx)
	if err == nil || websocket.CloseStatus(err) != -1 || ctx.Err() != nil {
		t.Fatalf("after the first message: %q, %v; want the connection dropped", msg, err)
	}
}

// rawStatus sends method path (absolute, under h.url) with key ("": none)
// and headers hdr, and returns the status.
func (h *harness) rawStatus(key, method, path string, hdr map[string]string) int {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// Knobs act after authentication: a request without a valid key is not
// faulted, delayed or counted and cannot delete a sandbox; a tenant's key
// may not use the test headers (403); and the server's own faults resolve
// the sandbox of a path in the caller's organization only.
func TestKnobsAfterAuth(t *testing.T) {
	dir := t.TempDir()
	tenant := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir, badRequests: true, knobs: &Knobs{Headers: true, CountRequests: true}})
	sb := startedSandbox(h, nil)
	h.s.ResetRequestCounts()
	for _, fault := range []string{"500", "delete", "reset"} {
		if st := h.rawStatus("", "GET", "/api/sandbox/"+sb.ID, map[string]string{HeaderTestFault: fault}); st != http.StatusUnauthorized {
			t.Fatalf("fault %s without a key: %d, want 401", fault, st)
		}
		if st := h.rawStatus("wrong-key", "GET", "/toolbox/"+sb.ID+"/version", map[string]string{HeaderTestFault: fault}); st != http.StatusUnauthorized {
			t.Fatalf("fault %s with a wrong key on the toolbox: %d, want 401", fault, st)
		}
	}
	if c := h.s.RequestCounts(sb.ID); c.Total() != 0 {
		t.Fatalf("requests without a valid key counted: %v", c)
	}
	for _, hdr := range []map[string]string{{HeaderTestFault: "delete"}, {HeaderTestLatency: "1ms"}, {HeaderTestToolbox: "daytona"}} {
		if st := h.rawStatus(tenant, "GET", "/api/sandbox/"+sb.ID, hdr); st != http.StatusForbidden {
			t.Fatalf("a tenant's request with %v: %d, want 403", hdr, st)
		}
	}
	if err := h.s.InjectFault(Fault{Kind: FaultDelete, Path: "/api/sandbox/"}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{sb.ID, sb.Name} {
		if st := h.rawStatus(tenant, "GET", "/api/sandbox/"+key, nil); st != http.StatusNotFound {
			t.Fatalf("a tenant's GET of another organization's sandbox %s: %d, want 404", key, st)
		}
	}
	h.s.mu.Lock()
	alive := h.s.byID[sb.ID] != nil
	h.s.mu.Unlock()
	if !alive {
		t.Fatal("the operator's sandbox was deleted by a knob on requests of another organization or without a key")
	}
	// The operator's own request is still faulted.
	if st := h.rawStatus(testKey, "GET", "/api/sandbox/"+sb.ID, nil); st != http.StatusNotFound {
		t.Fatalf("the operator's request with the delete fault: %d, want 404", st)
	}
}
