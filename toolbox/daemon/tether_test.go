package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// waitDead waits until pid has ended, for up to the tether's grace and a
// margin.
func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(toolbox.TetherGrace + 5*time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: pid %d still runs", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tethered sync exec's command dies when its request goes away (the
// client closed the connection: it gave up, or died); an untethered one
// runs on, as with Daytona.
func TestTetherSync(t *testing.T) {
	e := newEnv(t, true)
	for _, tethered := range []bool{true, false} {
		t.Run(fmt.Sprintf("tethered=%v", tethered), func(t *testing.T) {
			sid := fmt.Sprintf("s%v", tethered)
			e.createSession(sid)
			pidFile := filepath.Join(e.work, sid+".pid")
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", baseURL+"/process/session/"+sid+"/exec",
				strings.NewReader(fmt.Sprintf(`{"command":"sleep 60 & echo $! > %s; wait"}`, pidFile)))
			req.Header.Set("Content-Type", "application/json")
			if tethered {
				req.Header.Set(toolbox.HeaderUseExtensions, "stateless,tether")
			}
			done := make(chan error, 1)
			go func() {
				resp, err := e.client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			pid := readPids(t, pidFile, 1)[0]
			cancel()
			<-done
			if tethered {
				waitDead(t, pid, "the tethered command after its request went away")
				return
			}
			time.Sleep(200 * time.Millisecond) // the server noticed; nothing may happen
			if !pidAlive(pid) {
				t.Fatal("an untethered command died with its request")
			}
			e.expect(http.StatusNoContent, "DELETE", "/process/session/"+sid, nil)
			waitDead(t, pid, "the command of the deleted session")
		})
	}
}

// A tethered async command lives while a follower is connected or
// requests about it come, and dies TetherGrace after the last sign of its
// client: no follower ever, or a follower that dropped.
func TestTetherAsync(t *testing.T) {
	e := newEnv(t, true)
	start := func(sid string) (cid string, pid int) {
		e.createSession(sid)
		pidFile := filepath.Join(e.work, sid+".pid")
		data := e.expect(http.StatusAccepted, "POST", "/process/session/"+sid+"/exec",
			toolbox.SessionExecuteRequest{Command: fmt.Sprintf("sleep 60 & echo $! > %s; wait", pidFile), RunAsync: true},
			toolbox.HeaderUseExtensions, "tether")
		cid = strings.Split(strings.Split(string(data), `"cmdId":"`)[1], `"`)[0]
		return cid, readPids(t, pidFile, 1)[0]
	}
	t.Run("no follower", func(t *testing.T) {
		t.Parallel()
		_, pid := start("none")
		waitDead(t, pid, "a tethered command nobody follows")
	})
	t.Run("follower drops", func(t *testing.T) {
		t.Parallel()
		cid, pid := start("drop")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, _ := e.dial(ctx, "drop", cid, true, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
		time.Sleep(toolbox.TetherGrace + 500*time.Millisecond)
		if !pidAlive(pid) {
			t.Fatal("the command died while its follower was connected")
		}
		conn.CloseNow() // the client is gone: no close handshake
		waitDead(t, pid, "a tethered command whose follower dropped")
	})
	t.Run("polled", func(t *testing.T) {
		t.Parallel()
		cid, pid := start("poll")
		for end := time.Now().Add(toolbox.TetherGrace + 500*time.Millisecond); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			e.command("poll", cid)
		}
		if !pidAlive(pid) {
			t.Fatal("the command died while its client polled it")
		}
		waitDead(t, pid, "a tethered command no longer polled")
	})
}
