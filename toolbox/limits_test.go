package toolbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// hugeServer answers every request with handle; written counts the body
// bytes it managed to send.
func hugeServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, written *atomic.Int64)) (*toolbox.Client, *atomic.Int64) {
	t.Helper()
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(w, r, &written)
	}))
	t.Cleanup(srv.Close)
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: srv.URL, DisableWebSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, &written
}

// writeChunks writes the prefix, then chunk until total bytes were
// written or the client went away, then the suffix; no Content-Length,
// so only the client's own limit stops it.
func writeChunks(w http.ResponseWriter, written *atomic.Int64, prefix, chunk, suffix string, total int64) {
	n, _ := w.Write([]byte(prefix))
	written.Add(int64(n))
	b := []byte(chunk)
	for written.Load() < total {
		n, err := w.Write(b)
		written.Add(int64(n))
		if err != nil {
			return
		}
	}
	n, _ = w.Write([]byte(suffix))
	written.Add(int64(n))
}

// TestJSONAnswerBounded: a listing larger than the JSON limit is refused
// with ErrTooLarge after reading about the limit, whether or not the
// server announces its size.
func TestJSONAnswerBounded(t *testing.T) {
	const limit = 1 << 20
	defer toolbox.SetLimits(limit, limit)()
	const body = 64 << 20 // well past the limit and what sockets buffer
	c, written := hugeServer(t, func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
		w.Header().Set("Content-Type", "application/json")
		writeChunks(w, written, "[", `{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","size":1},`, `{"name":"z"}]`, body)
	})
	list, err := c.ListFiles(context.Background(), "/")
	if !errors.Is(err, toolbox.ErrTooLarge) || !strings.Contains(err.Error(), "1 MiB") {
		t.Fatalf("ListFiles of a %d-byte answer: %d entries, error %v; want ErrTooLarge naming the 1 MiB limit", body, len(list), err)
	}
	if n := written.Load(); n >= body {
		t.Errorf("the client read the whole %d-byte answer", n)
	}

	// Announced: refused before reading any of it.
	c, _ = hugeServer(t, func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.FormatInt(40<<30, 10))
		n, _ := w.Write([]byte("[]"))
		written.Add(int64(n))
	})
	if _, err := c.ListFiles(context.Background(), "/"); !errors.Is(err, toolbox.ErrTooLarge) || !strings.Contains(err.Error(), strconv.FormatInt(40<<30, 10)) {
		t.Fatalf("ListFiles of an answer announcing 40 GiB: %v; want ErrTooLarge with the announced size", err)
	}
}

// TestLogsSnapshotBounded: GET …/logs (CommandLogs, the polling follow)
// reads at most the output limit of a log.
func TestLogsSnapshotBounded(t *testing.T) {
	const limit = 1 << 20
	defer toolbox.SetLimits(limit, limit)()
	const body = 64 << 20
	c, written := hugeServer(t, func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
		w.Header().Set("Content-Type", "text/plain")
		writeChunks(w, written, "", strings.Repeat("log line\n", 1000), "", body)
	})
	stdout, _, err := c.CommandLogs(context.Background(), "s", "c")
	if !errors.Is(err, toolbox.ErrTooLarge) || !strings.Contains(err.Error(), "FollowLogs") {
		t.Fatalf("CommandLogs of a %d-byte log: %d bytes, error %v; want ErrTooLarge suggesting FollowLogs", body, len(stdout), err)
	}
	if n := written.Load(); n >= body {
		t.Errorf("the client read the whole %d-byte log", n)
	}
}

// TestBinaryExecSizeBounded: a binary exec answer whose headers claim 40
// GiB of stdout is refused before anything is allocated for it (the
// sizes are the sandbox's word).
func TestBinaryExecSizeBounded(t *testing.T) {
	c, _ := hugeServer(t, func(w http.ResponseWriter, r *http.Request, _ *atomic.Int64) {
		h := w.Header()
		h.Set(toolbox.HeaderExtensions, toolbox.ExtBinary)
		h.Set("Content-Type", toolbox.ContentTypeBinary)
		h.Set(toolbox.HeaderExitCode, "0")
		h.Set(toolbox.HeaderStdoutBytes, strconv.FormatInt(40<<30, 10))
		h.Set(toolbox.HeaderStderrBytes, "0")
		_, _ = w.Write([]byte("just a little"))
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := c.SessionExecute(context.Background(), "s", toolbox.SessionExecuteRequest{Command: "yes"})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, toolbox.ErrTooLarge) || !strings.Contains(err.Error(), "256 MiB") {
		t.Fatalf("exec claiming 40 GiB of stdout: %+v, %v; want ErrTooLarge naming the 256 MiB limit", res, err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
		t.Errorf("the exec allocated %d bytes", d)
	}
}

// TestRunCodeOutputBounded: RunCode gathers at most the output limit of
// an interpreter's endless output.
func TestRunCodeOutputBounded(t *testing.T) {
	const limit = 1 << 20
	defer toolbox.SetLimits(limit, limit)()
	const total = 64 << 20
	c, written := hugeServer(t, func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		if _, _, err := conn.Read(r.Context()); err != nil {
			return
		}
		msg, _ := json.Marshal(toolbox.InterpreterMessage{Type: toolbox.InterpreterStdout, Text: strings.Repeat("x", 64<<10)})
		for written.Load() < total {
			if err := conn.Write(r.Context(), websocket.MessageText, msg); err != nil {
				return
			}
			written.Add(int64(len(msg)))
		}
		_ = conn.Close(websocket.StatusNormalClosure, "")
	})
	res, err := c.RunCode(context.Background(), toolbox.InterpreterExecuteRequest{Code: "while True: print('x')"}, nil)
	if !errors.Is(err, toolbox.ErrTooLarge) {
		t.Fatalf("RunCode of %d bytes of output: %v; want ErrTooLarge", total, err)
	}
	if res == nil {
		t.Fatal("RunCode returned no result with its error")
	}
	if len(res.Stdout) > limit {
		t.Fatalf("RunCode gathered %d bytes; want at most %d", len(res.Stdout), limit)
	}
	if n := written.Load(); n >= total {
		t.Errorf("the client read all %d bytes", n)
	}
}
