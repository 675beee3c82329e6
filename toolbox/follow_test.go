package toolbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// testLog builds a marked log of n lines alternating streams irregularly,
// with multi-byte UTF-8, and returns it with the expected split.
func testLog(n int) (log, stdout, stderr []byte) {
	for i := range n {
		if i%3 == 2 {
			line := fmt.Sprintf("err %d ü€\n", i)
			log = append(log, "\x02\x02\x02"+line...)
			stderr = append(stderr, line...)
		} else {
			line := fmt.Sprintf("out %d ✓ 日本\n", i)
			log = append(log, "\x01\x01\x01"+line...)
			stdout = append(stdout, line...)
		}
	}
	return log, stdout, stderr
}

// syncCheckWriter records writes and fails the test if two writes (to
// either stream) ever overlap.
type syncCheckWriter struct {
	t     *testing.T
	guard *sync.Mutex
	buf   bytes.Buffer
	err   error
}

func (w *syncCheckWriter) Write(p []byte) (int, error) {
	if !w.guard.TryLock() {
		w.t.Error("concurrent writes to the output writers")
		return len(p), nil
	}
	defer w.guard.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	return w.buf.Write(p)
}

func writers(t *testing.T) (*syncCheckWriter, *syncCheckWriter) {
	g := new(sync.Mutex)
	return &syncCheckWriter{t: t, guard: g}, &syncCheckWriter{t: t, guard: g}
}

// feed appends log to a command in pieces of size step (cut anywhere), then
// sets its exit code. The pause between pieces only spreads the log over
// time, so that followers see it arrive piece by piece; nothing waits on it.
func feed(fs *fakeServer, sid, cid string, log []byte, step int, code int) {
	for i := 0; i < len(log); i += step {
		fs.appendLog(sid, cid, log[i:min(i+step, len(log))])
		time.Sleep(time.Millisecond)
	}
	fs.exit(sid, cid, code)
}

// awaitWriter collects output and closes seen once the output starts with
// want. It is safe for concurrent use.
type awaitWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func newAwaitWriter(want string) *awaitWriter {
	return &awaitWriter{want: want, seen: make(chan struct{})}
}

func (w *awaitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := w.buf.Len() >= len(w.want)
	w.buf.Write(p)
	if !had && w.buf.Len() >= len(w.want) && bytes.HasPrefix(w.buf.Bytes(), []byte(w.want)) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *awaitWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

type followCase struct {
	name       string
	ext        string
	wsMode     string
	abortAfter int
	chunk      int
	step       int
	noWS       bool
	wantWS     int // WebSocket connections, -1 = any
	wantPolls  bool
}

func TestFollowLogs(t *testing.T) {
	log, wantOut, wantErr := testLog(60)
	// Offsets cutting through a marker and through a UTF-8 sequence.
	midMarker := bytes.Index(log[100:], []byte{2, 2, 2}) + 100 + 1
	midRune := bytes.Index(log, []byte("✓")) + 1
	cases := []followCase{
		{name: "frames", ext: allExt, step: 97, wantWS: 1},
		// A normal close after the command ended: one GET command, no polling.
		{name: "markers split in every frame", ext: "", chunk: 1, step: 13, wantWS: 1},
		{name: "markers with frames ext off", ext: "stdin", chunk: 2, step: len(log), wantWS: 1},
		{name: "abnormal close mid-marker then poll", ext: "", wsMode: "abort", abortAfter: midMarker, chunk: 5, step: len(log), wantWS: 1, wantPolls: true},
		{name: "abnormal close mid-rune then poll", ext: "", wsMode: "abort", abortAfter: midRune, chunk: 7, step: len(log), wantWS: 1, wantPolls: true},
		{name: "plain early close then poll", ext: "", wsMode: "plainclose", abortAfter: midMarker, chunk: 3, step: len(log), wantWS: 1, wantPolls: true},
		{name: "frames abnormal close then poll", ext: allExt, wsMode: "abort", abortAfter: 200, step: len(log), wantWS: 1, wantPolls: true},
		{name: "upgrade refused", ext: "", wsMode: "reject", step: 50, wantWS: 0, wantPolls: true},
		{name: "websocket disabled", ext: allExt, noWS: true, step: 31, wantWS: 0, wantPolls: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeServer(tc.ext)
			fs.wsMode, fs.abortAfter, fs.chunk = tc.wsMode, tc.abortAfter, tc.chunk
			if tc.ext == allExt && tc.wsMode == "abort" {
				// Frames are cut at marker boundaries by the fake.
				fs.abortAfter = bytes.Index(log[tc.abortAfter:], []byte{1, 1, 1}) + tc.abortAfter
			}
			e := newEnv(t, fs, toolbox.ClientOptions{DisableWebSocket: tc.noWS, PollInterval: 5 * time.Millisecond})
			fs.addCommand("s", "c")
			stdout, stderr := writers(t)
			early := tc.wsMode == "abort" || tc.wsMode == "plainclose"
			if early {
				// Everything is there before the follow starts, so the
				// cut happens at the chosen offset.
				fs.appendLog("s", "c", log)
			}
			ctx := ctxT(t)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				if early {
					// The command ends once the client polls: after the
					// early close (and, for a plain close, the look at
					// the command that finds it still running).
					fs.waitUntil(ctx, func() bool { return fs.polls > 0 })
					fs.exit("s", "c", 7)
					return
				}
				feed(fs, "s", "c", log, tc.step, 7)
			}()
			fr, err := e.c.FollowLogs(ctx, "s", "c", stdout, stderr)
			code, killed := fr.ExitCode, fr.Killed
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if killed || code == nil || *code != 7 {
				t.Fatalf("exit code %v killed %v, want 7 false", code, killed)
			}
			if !bytes.Equal(stdout.buf.Bytes(), wantOut) {
				t.Errorf("stdout differs:\n got %q\nwant %q", stdout.buf.Bytes(), wantOut)
			}
			if !bytes.Equal(stderr.buf.Bytes(), wantErr) {
				t.Errorf("stderr differs:\n got %q\nwant %q", stderr.buf.Bytes(), wantErr)
			}
			fs.mu.Lock()
			ws, polls, running := fs.wsConns, fs.polls, fs.running
			fs.mu.Unlock()
			if tc.wantWS >= 0 && ws != tc.wantWS {
				t.Errorf("%d WebSocket connections, want %d", ws, tc.wantWS)
			}
			// A follow without frames that sees the command end before
			// the socket closes reads the log's rest once (a poll of an
			// ended command); polling a running command is the fallback.
			if tc.wantPolls && polls == 0 {
				t.Errorf("no polls, want polling")
			}
			if !tc.wantPolls && (running > 0 || polls > 1) {
				t.Errorf("%d polls (%d of the running command), want no polling", polls, running)
			}
			for _, r := range fs.requests() {
				if r.Header.Get("Upgrade") != "" {
					if r.Header.Get(toolbox.HeaderSDKVersion) == "" || r.Header.Get(toolbox.HeaderSource) == "" {
						t.Errorf("WebSocket handshake without SDK headers: %v", r.Header)
					}
					wantUse := ""
					if fs.has("frames") {
						wantUse = "frames"
					}
					if got := r.Header.Get(toolbox.HeaderUseExtensions); got != wantUse {
						t.Errorf("handshake %s = %q, want %q", toolbox.HeaderUseExtensions, got, wantUse)
					}
				}
			}
		})
	}
}

func TestFollowLogsKilled(t *testing.T) {
	for _, tc := range []struct {
		name string
		ext  string
		noWS bool
	}{{"frames", allExt, false}, {"markers", "", false}, {"polling", "", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeServer(tc.ext)
			e := newEnv(t, fs, toolbox.ClientOptions{DisableWebSocket: tc.noWS, PollInterval: 5 * time.Millisecond})
			fs.addCommand("s", "c")
			fs.appendLog("s", "c", []byte("\x01\x01\x01started\n"))
			// The session goes once the follower has the output.
			out := newAwaitWriter("started\n")
			go func() {
				<-out.seen
				fs.deleteSession("s")
			}()
			fr, err := e.c.FollowLogs(ctxT(t), "s", "c", out, nil)
			code, killed := fr.ExitCode, fr.Killed
			if err != nil || !killed || code != nil {
				t.Fatalf("FollowLogs = %v, %v, %v; want nil, true, nil", code, killed, err)
			}
			if out.String() != "started\n" {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}

func TestFollowLogsMissingCommand(t *testing.T) {
	for _, noWS := range []bool{false, true} {
		fs := newFakeServer("")
		e := newEnv(t, fs, toolbox.ClientOptions{DisableWebSocket: noWS})
		fs.addCommand("s", "c")
		fr, err := e.c.FollowLogs(ctxT(t), "s", "nope", nil, nil)
		killed := fr.Killed
		if !errors.Is(err, sandbox.ErrNotFound) || killed {
			t.Fatalf("noWS=%v: FollowLogs of a missing command = %v killed=%v, want ErrNotFound", noWS, err, killed)
		}
	}
}

func TestFollowLogsCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		ext  string
		noWS bool
	}{{"frames", allExt, false}, {"markers", "", false}, {"polling", "", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeServer(tc.ext)
			e := newEnv(t, fs, toolbox.ClientOptions{DisableWebSocket: tc.noWS, PollInterval: 5 * time.Millisecond})
			fs.addCommand("s", "c")
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			start := time.Now()
			_, err := e.c.FollowLogs(ctx, "s", "c", nil, nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("returned %v after cancel", d)
			}
		})
	}
}

func TestFollowLogsWriterError(t *testing.T) {
	for _, ext := range []string{allExt, ""} {
		fs := newFakeServer(ext)
		e := newEnv(t, fs, toolbox.ClientOptions{})
		fs.addCommand("s", "c")
		fs.appendLog("s", "c", []byte("\x01\x01\x01x\n"))
		stdout, _ := writers(t)
		stdout.err = errors.New("pipe full")
		_, err := e.c.FollowLogs(ctxT(t), "s", "c", stdout, nil)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("pipe full")) {
			t.Fatalf("ext %q: err = %v, want the writer's error", ext, err)
		}
	}
}
