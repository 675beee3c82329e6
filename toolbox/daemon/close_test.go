package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
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
	e.expectError(503, codeInternal, "GET", "/process/session/c/command/"+queued, nil)
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
