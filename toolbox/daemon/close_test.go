package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestCloseKillsEverything(t *testing.T) {
	e := newErrEnv(t)
	e.createSession("c")
	pidFile := filepath.Join(e.work, "pids")
	cid := e.execAsync("c", toolbox.SessionExecuteRequest{Command: fmt.Sprintf("setsid sleep 60 & echo $! > %s; sleep 61", pidFile), RunAsync: true})
	queued := e.execAsync("c", toolbox.SessionExecuteRequest{Command: "echo queued", RunAsync: true})
	pids := readPids(t, pidFile, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _ := e.dial(ctx, "c", cid, true, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
	defer conn.CloseNow()
	execDone := make(chan int, 1)
	go func() {
		resp, _ := e.do("POST", "/process/execute", toolbox.ExecuteRequest{Command: "sleep 62"})
		execDone <- resp.StatusCode
	}()
	eventually(t, "the execute runs", func() bool { return len(findProcs(nil, markerKey+"="+oneShotPrefix)) > 0 })

	ss, _ := e.srv.session("c")
	if len(findProcs(nil, markerKey+"="+ss.token+":")) < 3 {
		t.Fatal("expected the shell, its children and a spare shell to be tagged")
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if left := findProcs(nil, markerKey+"="+ss.token+":"); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	_, ce := readAll(ctx, t, conn)
	if ce.Code != websocket.StatusNormalClosure && ce.Code != websocket.StatusGoingAway {
		t.Errorf("follower close %v", ce)
	}
	select {
	case <-execDone:
	case <-ctx.Done():
		t.Fatal("execute did not return after Close")
	}
	for _, pid := range pids {
		if pidAlive(pid) {
			t.Errorf("pid %d survived Close", pid)
		}
	}
	if c := e.srv.Close(); c != nil {
		t.Errorf("second Close: %v", c)
	}
	e.expectError(404, codeNotFound, "GET", "/process/session/c/command/"+queued, nil)
}

// While and after it closes, the server answers only what Daytona's specs
// declare (the traffic is validated): a sync exec in flight and requests
// about sessions get 404, as for deleted sessions; requests that would
// start something new get no answer. (It used to answer 503, which
// neither spec declares for these operations: TestConformancePolling's
// Shutdown failed when a poll arrived during Close.)
func TestClosedServerAnswersInSpec(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("s")
	cid := e.execAsync("s", toolbox.SessionExecuteRequest{Command: "sleep 60", RunAsync: true})
	e.createSession("sync")
	syncDone := make(chan int, 1)
	go func() {
		resp, err := e.client.Post(baseURL+"/process/session/sync/exec", "application/json",
			strings.NewReader(`{"command":"echo started; sleep 61"}`))
		if err != nil {
			syncDone <- -1
			return
		}
		resp.Body.Close()
		syncDone <- resp.StatusCode
	}()
	eventually(t, "the sync exec runs", func() bool {
		ss, err := e.srv.session("sync")
		if err != nil {
			return false
		}
		info := ss.info()
		return len(info.Commands) == 1 && len(mustSnapshot(t, ss, info.Commands[0].ID)) > 0
	})
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if code := <-syncDone; code != http.StatusNotFound {
		t.Errorf("sync exec in flight during Close: status %d, want 404", code)
	}
	e.expectError(404, codeNotFound, "GET", "/process/session/s", nil)
	e.expectError(404, codeNotFound, "GET", "/process/session/s/command/"+cid, nil)
	e.expectError(404, codeNotFound, "GET", "/process/session/s/command/"+cid+"/logs", nil)
	e.expectError(404, codeNotFound, "POST", "/process/session/s/exec", toolbox.SessionExecuteRequest{Command: "true"})
	e.expectError(404, codeNotFound, "DELETE", "/process/session/s", nil)
	if got := string(e.expect(200, "GET", "/process/session", nil)); got != "[]" {
		t.Errorf("sessions after Close: %s", got)
	}
	for _, path := range []string{"/process/session", "/process/execute"} {
		body := `{"sessionId":"new"}`
		if path == "/process/execute" {
			body = `{"command":"true"}`
		}
		resp, err := e.client.Post(baseURL+path, "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			t.Errorf("POST %s after Close: status %d, want no answer", path, resp.StatusCode)
		}
	}
}

// mustSnapshot returns the stdout logged so far by command cid of ss.
func mustSnapshot(t *testing.T, ss *session, cid string) []byte {
	t.Helper()
	c, err := ss.command(cid)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.log.snapshot(formSplit)
	if err != nil {
		return nil
	}
	return out.stdout
}

// The log of a command that prints a lot lives on disk, not in memory.
func TestLogDoesNotStayInMemory(t *testing.T) {
	e := newErrEnv(t)
	e.createSession("mem")
	const n = 64 << 20
	cid := e.execAsync("mem", toolbox.SessionExecuteRequest{Command: fmt.Sprintf("head -c %d /dev/zero", n), RunAsync: true})
	e.waitExit("mem", cid)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > 24<<20 {
		t.Errorf("heap holds %d MiB after a %d MiB command", ms.HeapAlloc>>20, n>>20)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _ := e.dial(ctx, "mem", cid, true, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
	defer conn.CloseNow()
	total := 0
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			break
		}
		total += len(data) - 1
	}
	if total != n {
		t.Errorf("followed %d bytes, want %d", total, n)
	}
}
