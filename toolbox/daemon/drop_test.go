package daemon

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// statelessHdr opts in to the stateless extension (and base64, as the
// process manager does).
var statelessHdr = []string{toolbox.HeaderUseExtensions, "base64,stateless"}

// spillPath is where the log of command cid of session sid spills.
func (e *testEnv) spillPath(sid, cid string) string {
	e.t.Helper()
	ss, err := e.srv.session(sid)
	if err != nil {
		e.t.Fatal(err)
	}
	return filepath.Join(ss.dir, cid+".log")
}

// eventually polls cond for up to 5 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not the case after 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// logsOf returns GET …/logs as a current SDK sees it.
func (e *testEnv) logsOf(sid, cid string) toolbox.SessionCommandLogsResponse {
	e.t.Helper()
	data := e.expect(200, "GET", "/process/session/"+sid+"/command/"+cid+"/logs", nil, sdk...)
	var l toolbox.SessionCommandLogsResponse
	if err := json.Unmarshal(data, &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// followFrames follows a command with the frames extension to its end and
// returns the stdout bytes and the close.
func (e *testEnv) followFrames(ctx context.Context, sid, cid string) (int, websocket.CloseError) {
	e.t.Helper()
	conn, _ := e.dial(ctx, sid, cid, true, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
	defer conn.CloseNow()
	n := 0
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				e.t.Fatalf("follow: %v", err)
			}
			return n, ce
		}
		n += len(data) - 1
	}
}

// waitDetached waits until nothing reads the log of a command piece by
// piece: its followers' handlers have ended, and with them their decision
// whether to drop the log.
func (e *testEnv) waitDetached(sid, cid string) {
	e.t.Helper()
	_, c, err := e.srv.sessionCommand(sid, cid)
	if err != nil {
		e.t.Fatal(err)
	}
	eventually(e.t, "the followers of "+cid+" are gone", func() bool {
		c.log.mu.Lock()
		defer c.log.mu.Unlock()
		return c.log.readers == 0
	})
}

// followUnanswered opens a log follow WebSocket by hand and reads what the
// server sends as plain bytes, answering nothing, until the server's close
// frame has arrived. It returns the connection, still open: to the server,
// a follower that has read nothing (not even the close).
func (e *testEnv) followUnanswered(ctx context.Context, sid, cid string, hdr http.Header) net.Conn {
	e.t.Helper()
	conn, err := e.tr.DialContext(ctx, "unix", "")
	if err != nil {
		e.t.Fatal(err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", baseURL+"/process/session/"+sid+"/command/"+cid+"/logs?follow=true", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	maps.Copy(req.Header, hdr)
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(key))
	if err := req.Write(conn); err != nil {
		e.t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		e.t.Fatalf("handshake: %v %v", resp, err)
	}
	// Server frames are not masked: an opcode byte, a length byte, an
	// extended length for lengths 126 (16 bits) and 127 (64 bits).
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			e.t.Fatalf("reading a frame: %v", err)
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			_, err = io.ReadFull(br, b[:])
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			_, err = io.ReadFull(br, b[:])
			n = binary.BigEndian.Uint64(b[:])
		}
		if err == nil {
			_, err = io.CopyN(io.Discard, br, int64(n))
		}
		if err != nil {
			e.t.Fatalf("reading a frame: %v", err)
		}
		if h[0]&0x0f == 0x8 { // close
			return conn
		}
	}
}

// A stateless command's log is freed once its output was delivered: by the
// response of a sync exec, or to a frames follower that saw the close. Its
// exit code stays; its log reads as empty.
func TestStatelessLogDropped(t *testing.T) {
	e := newEnvWith(t, spectest.Load(t).SkipBodiesOver(bigBody)) // big bodies stay unchecked
	e.createSession("d")
	const big = 2 << 20 // spills to a file
	bigCmd := fmt.Sprintf("yes | head -c %d", big)

	t.Run("sync", func(t *testing.T) {
		mem0 := e.srv.logMem.Load()
		r := e.execSync("d", bigCmd+"; printf e >&2; exit 3", statelessHdr...)
		so, _ := base64.StdEncoding.DecodeString(*r.Stdout)
		if *r.ExitCode != 3 || len(so) != big || *r.Stderr != base64.StdEncoding.EncodeToString([]byte("e")) {
			t.Fatalf("exit %d, %d bytes of stdout, stderr %q", *r.ExitCode, len(so), *r.Stderr)
		}
		spill := e.spillPath("d", r.CmdID)
		eventually(t, "spill file removed", func() bool { return !exists(spill) })
		if got := e.command("d", r.CmdID); got.ExitCode == nil || *got.ExitCode != 3 {
			t.Errorf("GET command after the drop: %+v", got)
		}
		if l := e.logsOf("d", r.CmdID); l.Output != "" || l.Stdout != "" || l.Stderr != "" {
			t.Errorf("logs after the drop: %+v", l)
		}
		// A small log lives in memory, and the memory is given back.
		r = e.execSync("d", "seq 1 10000", statelessHdr...)
		eventually(t, "memory freed", func() bool { return e.srv.logMem.Load() == mem0 })
		if l := e.logsOf("d", r.CmdID); l.Output != "" {
			t.Errorf("logs after the drop: %+v", l)
		}
	})

	t.Run("stateful sync keeps the log", func(t *testing.T) {
		mem0 := e.srv.logMem.Load()
		r := e.execSync("d", bigCmd)
		if !exists(e.spillPath("d", r.CmdID)) {
			t.Error("the spill file of a stateful command is gone")
		}
		if l := e.logsOf("d", r.CmdID); len(l.Stdout) != big {
			t.Errorf("logs: %d bytes, want %d", len(l.Stdout), big)
		}
		r = e.execSync("d", "seq 1 10000")
		if e.srv.logMem.Load() <= mem0 {
			t.Error("the in-memory log of a stateful command was freed")
		}
		if l := e.logsOf("d", r.CmdID); !strings.HasSuffix(l.Stdout, "\n10000\n") {
			t.Errorf("logs: %q…", l.Stdout[:min(len(l.Stdout), 20)])
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startAsync := func(command string, hdr ...string) string {
		t.Helper()
		data := e.expect(202, "POST", "/process/session/d/exec",
			toolbox.SessionExecuteRequest{Command: command, RunAsync: true}, append(append([]string(nil), sdk...), hdr...)...)
		var r toolbox.SessionExecuteResponse
		if err := json.Unmarshal(data, &r); err != nil || r.CmdID == "" {
			t.Fatalf("async exec: %s %v", data, err)
		}
		return r.CmdID
	}

	t.Run("async frames follower", func(t *testing.T) {
		mem0 := e.srv.logMem.Load()
		cid := startAsync(bigCmd+"; exit 4", statelessHdr...)
		n, ce := e.followFrames(ctx, "d", cid)
		if n != big || ce.Code != websocket.StatusNormalClosure || ce.Reason != "exit=4" {
			t.Fatalf("followed %d bytes, close %v", n, ce)
		}
		spill := e.spillPath("d", cid)
		eventually(t, "spill file removed", func() bool { return !exists(spill) })
		if got := e.command("d", cid); got.ExitCode == nil || *got.ExitCode != 4 {
			t.Errorf("GET command after the drop: %+v", got)
		}
		if l := e.logsOf("d", cid); l.Output != "" || l.Stdout != "" {
			t.Errorf("logs after the drop: %d bytes", len(l.Output))
		}
		// A follower arriving later gets an empty log and the exit code.
		if n, ce := e.followFrames(ctx, "d", cid); n != 0 || ce.Reason != "exit=4" {
			t.Errorf("late follower: %d bytes, close %v", n, ce)
		}
		cid = startAsync("seq 1 10000", statelessHdr...)
		e.followFrames(ctx, "d", cid)
		eventually(t, "memory freed", func() bool { return e.srv.logMem.Load() == mem0 })
	})

	t.Run("async follower leaves early", func(t *testing.T) {
		cid := startAsync(bigCmd, statelessHdr...)
		conn, _ := e.dial(ctx, "d", cid, true, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
		if _, _, err := conn.Read(ctx); err != nil {
			t.Fatal(err)
		}
		conn.CloseNow()
		e.waitExit("d", cid)
		e.waitDetached("d", cid)
		if !exists(e.spillPath("d", cid)) {
			t.Fatal("the log was dropped although its follower left early")
		}
		if l := e.logsOf("d", cid); len(l.Stdout) != big {
			t.Errorf("logs: %d bytes, want %d", len(l.Stdout), big)
		}
		// Without frames the follower's close says nothing: kept too.
		conn, _ = e.dial(ctx, "d", cid, true, nil)
		readAll(ctx, t, conn)
		conn.CloseNow()
		e.waitDetached("d", cid)
		if !exists(e.spillPath("d", cid)) {
			t.Fatal("the log was dropped after a follower without frames")
		}
		// A follower that completes frees it.
		if n, _ := e.followFrames(ctx, "d", cid); n != big {
			t.Fatalf("second follower: %d bytes", n)
		}
		eventually(t, "spill file removed", func() bool { return !exists(e.spillPath("d", cid)) })

		// Everything and the close were sent (they fit in the socket's
		// buffers), but the follower left without reading them: kept.
		cid = startAsync("seq 1 2000", statelessHdr...)
		e.waitExit("d", cid)
		raw := e.followUnanswered(ctx, "d", cid, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
		raw.Close()
		e.waitDetached("d", cid)
		if l := e.logsOf("d", cid); !strings.HasSuffix(l.Stdout, "\n2000\n") {
			t.Errorf("the log of a follower that read nothing was dropped: %q", l.Stdout)
		}
	})

	t.Run("stateful async keeps the log", func(t *testing.T) {
		cid := startAsync(bigCmd)
		if n, _ := e.followFrames(ctx, "d", cid); n != big {
			t.Fatalf("followed %d bytes", n)
		}
		e.waitDetached("d", cid)
		if !exists(e.spillPath("d", cid)) {
			t.Fatal("the log of a stateful command was dropped")
		}
	})

	// Deleting the session removes what is left.
	e.expect(204, "DELETE", "/process/session/d", nil)
	if files, _ := filepath.Glob(filepath.Join(e.srv.tmpDir, "*", "*.log")); len(files) > 0 {
		t.Errorf("log files left: %v", files)
	}
	if m := e.srv.logMem.Load(); m != 0 {
		t.Errorf("%d log bytes still counted in memory", m)
	}
}

// A drop waits for the readers attached to the log.
func TestLogDropWaitsForReaders(t *testing.T) {
	var mem atomic.Int64
	l := newCmdLog(filepath.Join(t.TempDir(), "x.log"), &mem, false)
	l.write(streamStdout, []byte("hello"))
	l.finish()
	l.attach()
	l.drop()
	if size, _, _, err := l.state(); size == 0 || err != nil {
		t.Fatalf("dropped under a reader: size %d, %v", size, err)
	}
	if o, err := l.snapshot(formCombined); string(o.combined) != "hello" || err != nil {
		t.Fatalf("snapshot %q %v", o.combined, err)
	}
	l.detach()
	if size, done, _, err := l.state(); size != 0 || !done || err != nil || mem.Load() != 0 {
		t.Fatalf("after the last reader: size %d done %v err %v mem %d", size, done, err, mem.Load())
	}
	l.write(streamStdout, []byte("late"))
	if o, err := l.snapshot(formCombined); len(o.combined) != 0 || err != nil {
		t.Fatalf("snapshot after drop %q %v", o.combined, err)
	}
	l.close()
}
