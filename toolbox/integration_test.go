package toolbox_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// serverMode is how the test daemon presents itself to the client.
type serverMode int

const (
	// extended: agentbox's server, with its extensions.
	extended serverMode = iota
	// plain: the extension headers are stripped both ways, so the client
	// sees a server without extensions.
	plain
	// daytona: the daemon's Daytona-behaviour mode (daemon.Options.Daytona):
	// no extensions, and Daytona's quirks.
	daytona
)

// modes lists every serverMode.
var modes = []serverMode{extended, plain, daytona}

func (m serverMode) String() string { return [...]string{"extensions", "plain", "daytona"}[m] }

// isPlain reports whether the client sees no extensions.
func (m serverMode) isPlain() bool { return m != extended }

// exit is a statement ending a session command with code n that does not
// end a Daytona session's shell (a raw exit kills it in the daytona mode;
// agentbox's server runs every command in a shell of its own).
func (m serverMode) exit(n int) string {
	if m == daytona {
		return "(exit " + strconv.Itoa(n) + ")"
	}
	return "exit " + strconv.Itoa(n)
}

// daemonEnv serves a real toolbox/daemon on a unix socket, validated
// against the spec files, and returns a client for it.
func daemonEnv(t *testing.T, mode serverMode, opts toolbox.ClientOptions) (*toolbox.Client, string) {
	t.Helper()
	return daemonEnvV(t, mode, true, opts)
}

func daemonEnvV(t *testing.T, mode serverMode, validate bool, opts toolbox.ClientOptions, mods ...func(*daemon.Options)) (*toolbox.Client, string) {
	t.Helper()
	work := t.TempDir()
	do := daemon.Options{WorkDir: work, Daytona: mode == daytona}
	for _, f := range mods {
		f(&do)
	}
	srv, err := daemon.New(do)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if mode == plain {
		h = stripExtensions(h)
	}
	if validate {
		h = spectest.Load(t).Handler(t, h)
	}
	sock := filepath.Join(t.TempDir(), "toolbox.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	opts.Socket = sock
	c, err := toolbox.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close() // ends followers, so hijacked connections end too
		hs.Close()
		<-done
	})
	return c, work
}

// stripExtensions hides the agentbox extensions: requests lose
// X-Agentbox-Use, responses lose X-Agentbox-Extensions.
func stripExtensions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(toolbox.HeaderUseExtensions)
		next.ServeHTTP(&stripWriter{ResponseWriter: w}, r)
	})
}

type stripWriter struct{ http.ResponseWriter }

func (w *stripWriter) WriteHeader(code int) {
	w.Header().Del(toolbox.HeaderExtensions)
	w.ResponseWriter.WriteHeader(code)
}

func (w *stripWriter) Write(p []byte) (int, error) {
	w.Header().Del(toolbox.HeaderExtensions)
	return w.ResponseWriter.Write(p)
}

func (w *stripWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.Header().Del(toolbox.HeaderExtensions)
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *stripWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *stripWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestDaemonBasics(t *testing.T) {
	c, work := daemonEnv(t, extended, toolbox.ClientOptions{})
	ctx := ctxT(t)
	ext, err := c.Extensions(ctx)
	if err != nil || ext != (toolbox.Extensions{Frames: true, Stdin: true, Base64: true, Stateless: true, Binary: true, Tether: true, PtyCommand: true}) {
		t.Fatalf("Extensions = %+v, %v", ext, err)
	}
	if d, err := c.WorkDir(ctx); err != nil || d != work {
		t.Fatalf("WorkDir = %q, %v; want %q", d, err, work)
	}
	r, err := c.Execute(ctx, toolbox.ExecuteRequest{Command: "echo one; echo two >&2"})
	if err != nil || r.ExitCode != 0 || !strings.Contains(r.Result, "one") || !strings.Contains(r.Result, "two") {
		t.Fatalf("Execute = %+v, %v", r, err)
	}
}

// sessionEnv is daemonEnv with session sid created, and a context for the
// test.
func sessionEnv(t *testing.T, mode serverMode, sid string) (*toolbox.Client, context.Context) {
	t.Helper()
	c, _ := daemonEnv(t, mode, toolbox.ClientOptions{})
	ctx := ctxT(t)
	if err := c.CreateSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

func TestDaemonSessionExecute(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			c, ctx := sessionEnv(t, mode, "s")
			r, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: `printf 'out\n'; printf 'err é\n' >&2; printf 'bin\377\n'; ` + mode.exit(3)})
			if err != nil {
				t.Fatal(err)
			}
			wantOut := "out\nbin\xff\n"
			if mode.isPlain() {
				wantOut = "out\nbin\ufffd\n" // JSON strings cannot carry the byte
			}
			if string(r.Stdout) != wantOut || string(r.Stderr) != "err é\n" || r.ExitCode == nil || *r.ExitCode != 3 {
				t.Fatalf("exec = stdout %q stderr %q exit %v", r.Stdout, r.Stderr, r.ExitCode)
			}
			// The session survived the command's end and keeps its state.
			if _, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: "export K=v; cd /"}); err != nil {
				t.Fatal(err)
			}
			r, err = c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: `echo "$K $PWD"`})
			if err != nil || string(r.Stdout) != "v /\n" {
				t.Fatalf("state: %q, %v", r.Stdout, err)
			}
		})
	}
}

func TestDaemonFollow(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode serverMode
		noWS bool
	}{{"frames", extended, false}, {"markers", plain, false}, {"polling base64", extended, true}, {"polling plain", plain, true},
		{"daytona markers", daytona, false}, {"daytona polling", daytona, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := daemonEnv(t, tc.mode, toolbox.ClientOptions{DisableWebSocket: tc.noWS, PollInterval: 10 * time.Millisecond})
			ctx := ctxT(t)
			if err := c.CreateSession(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			script := `for i in 1 2 3 4 5; do echo "out $i ✓"; echo "err $i" >&2; sleep 0.01; done; printf 'tail'; ` + tc.mode.exit(5)
			r, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: script, RunAsync: true})
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			fr, err := c.FollowLogs(ctx, "s", r.CmdID, &out, &errb)
			code, killed := fr.ExitCode, fr.Killed
			if err != nil || killed {
				t.Fatalf("FollowLogs: %v killed=%v", err, killed)
			}
			if code == nil {
				cmd, err := c.GetCommand(ctx, "s", r.CmdID)
				if err != nil {
					t.Fatal(err)
				}
				code = cmd.ExitCode
			}
			if code == nil || *code != 5 {
				t.Fatalf("exit code %v, want 5", code)
			}
			want := "out 1 ✓\nout 2 ✓\nout 3 ✓\nout 4 ✓\nout 5 ✓\ntail"
			if tc.mode == daytona {
				want += "\n" // Daytona ends the last line
			}
			if out.String() != want {
				t.Errorf("stdout %q, want %q", out.String(), want)
			}
			if want := "err 1\nerr 2\nerr 3\nerr 4\nerr 5\n"; errb.String() != want {
				t.Errorf("stderr %q, want %q", errb.String(), want)
			}
			// Following a finished command replays it.
			out.Reset()
			errb.Reset()
			if _, err := c.FollowLogs(ctx, "s", r.CmdID, &out, &errb); err != nil || !strings.HasPrefix(out.String(), "out 1") {
				t.Fatalf("second follow: %q, %v", out.String(), err)
			}
		})
	}
}

// FollowLogs tells when the server knows the log was delivered (the
// frames close), after which it drops a stateless command's log.
func TestDaemonFollowDelivered(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode serverMode
		noWS bool
	}{{"frames", extended, false}, {"markers", plain, false}, {"polling", extended, true}, {"daytona", daytona, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := daemonEnv(t, tc.mode, toolbox.ClientOptions{DisableWebSocket: tc.noWS, PollInterval: 10 * time.Millisecond})
			ctx := ctxT(t)
			if err := c.CreateSession(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			r, err := c.SessionExecuteWith(ctx, "s", toolbox.SessionExecuteRequest{Command: "echo hi; " + tc.mode.exit(2), RunAsync: true},
				toolbox.SessionExecOptions{Stateless: !tc.mode.isPlain()})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			fr, err := c.FollowLogs(ctx, "s", r.CmdID, &out, nil)
			if err != nil || fr.Killed || out.String() != "hi\n" {
				t.Fatalf("FollowLogs = %+v, %v; stdout %q", fr, err, out.String())
			}
			want := !tc.mode.isPlain() && !tc.noWS
			if fr.Delivered != want || (want && (fr.ExitCode == nil || *fr.ExitCode != 2)) {
				t.Fatalf("FollowLogs = %+v, want Delivered %v and exit 2", fr, want)
			}
			// The server dropped the log of the stateless command only
			// when it was delivered; the exit code stays.
			deadline := time.Now().Add(5 * time.Second)
			for {
				stdout, _, err := c.CommandLogs(ctx, "s", r.CmdID)
				if err != nil {
					t.Fatal(err)
				}
				if want && len(stdout) > 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if (len(stdout) == 0) != want {
					t.Fatalf("log after the follow: %q (delivered %v)", stdout, want)
				}
				break
			}
			if cmd, err := c.GetCommand(ctx, "s", r.CmdID); err != nil || cmd.ExitCode == nil || *cmd.ExitCode != 2 {
				t.Fatalf("GetCommand = %+v, %v", cmd, err)
			}
		})
	}
}

func TestDaemonStdinAndKill(t *testing.T) {
	c, _ := daemonEnv(t, extended, toolbox.ClientOptions{})
	ctx := ctxT(t)
	if err := c.CreateSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	r, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: "cat; echo done", RunAsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendInput(ctx, "s", r.CmdID, []byte("no newline")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseInput(ctx, "s", r.CmdID); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	fr, err := c.FollowLogs(ctx, "s", r.CmdID, &out, nil)
	code, killed := fr.ExitCode, fr.Killed
	if err != nil || killed || code == nil || *code != 0 || out.String() != "no newlinedone\n" {
		t.Fatalf("stdin: %q code %v killed %v err %v", out.String(), code, killed, err)
	}
	if err := c.SendInput(ctx, "s", r.CmdID, []byte("late")); !errors.Is(err, sandbox.ErrExited) {
		t.Fatalf("input after exit: %v, want ErrExited", err)
	}

	for _, noWS := range []bool{false, true} {
		c2, _ := daemonEnv(t, extended, toolbox.ClientOptions{DisableWebSocket: noWS, PollInterval: 10 * time.Millisecond})
		if err := c2.CreateSession(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		r, err = c2.SessionExecute(ctx, "k", toolbox.SessionExecuteRequest{Command: "echo up; sleep 30", RunAsync: true})
		if err != nil {
			t.Fatal(err)
		}
		// The session goes once the follower has the command's output.
		up := newAwaitWriter("up\n")
		go func() {
			<-up.seen
			_ = c2.DeleteSession(context.Background(), "k")
		}()
		fr, err = c2.FollowLogs(ctx, "k", r.CmdID, up, nil)
		code, killed = fr.ExitCode, fr.Killed
		if err != nil || !killed || up.String() != "up\n" {
			t.Fatalf("noWS=%v: kill while following: %q code %v killed %v err %v", noWS, up.String(), code, killed, err)
		}
	}
}

func TestDaemonFiles(t *testing.T) {
	c, work := daemonEnv(t, extended, toolbox.ClientOptions{})
	ctx := ctxT(t)
	data := bytes.Repeat([]byte{0, 1, 2, 0xff}, 100000)
	if err := c.Upload(ctx, toolbox.UploadFile{Path: "dir/a.bin", Content: bytes.NewReader(data)}, toolbox.UploadFile{Path: filepath.Join(work, "b.txt"), Content: strings.NewReader("b")}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.Download(ctx, "dir/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("download: %d bytes, want %d", len(got), len(data))
	}
	if err := c.CreateFolder(ctx, "new/deep", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := c.Move(ctx, "b.txt", "new/deep/c.txt"); err != nil {
		t.Fatal(err)
	}
	fi, err := c.GetFileInfo(ctx, "new/deep/c.txt")
	if err != nil || fi.Size != 1 || fi.IsDir {
		t.Fatalf("GetFileInfo = %+v, %v", fi, err)
	}
	list, err := c.ListFiles(ctx, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("ListFiles = %+v, %v", list, err)
	}
	if err := c.Delete(ctx, "new", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(work, "new")); !os.IsNotExist(err) {
		t.Fatalf("deleted dir: %v", err)
	}
	if _, err := c.GetFileInfo(ctx, "new"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("GetFileInfo of deleted: %v, want ErrNotFound", err)
	}
	if err := c.Delete(ctx, "../escape", false); err == nil {
		t.Fatal("path traversal accepted")
	}
}

// TestDaemonDownloadMissing is not validated: the spec declares only
// application/octet-stream for GET /files/download, error answers included.
func TestDaemonDownloadMissing(t *testing.T) {
	c, _ := daemonEnvV(t, extended, false, toolbox.ClientOptions{})
	_, err := c.Download(ctxT(t), "missing")
	var ae *toolbox.APIError
	if !errors.Is(err, sandbox.ErrNotFound) || !errors.As(err, &ae) || ae.Message == "" {
		t.Fatalf("Download of missing: %v, want ErrNotFound with a message", err)
	}
}

// BenchmarkCommand measures one command through the real daemon over a
// unix socket, against os/exec of the same shell command measured in the
// same run (reported as x-os-exec: how many times slower). round-trip is
// GET /version: the client's and HTTP's share of a command.
func BenchmarkCommand(b *testing.B) {
	var base float64
	b.Run("os-exec", func(b *testing.B) {
		for range b.N {
			if err := exec.Command("sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		base = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	run := func(b *testing.B, mode string) {
		srv, err := daemon.New(daemon.Options{WorkDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		sock := filepath.Join(b.TempDir(), "s.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		hs := &http.Server{Handler: srv}
		go hs.Serve(ln)
		defer func() { srv.Close(); hs.Close() }()
		c, err := toolbox.NewClient(toolbox.ClientOptions{Socket: sock})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		if err := c.CreateSession(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		async := mode == "async"
		for range b.N {
			if mode == "version" {
				if _, err := c.Version(ctx); err != nil {
					b.Fatal(err)
				}
				continue
			}
			r, err := c.SessionExecuteWith(ctx, "bench", toolbox.SessionExecuteRequest{Command: "true", RunAsync: async},
				toolbox.SessionExecOptions{Stateless: mode == "stateless"})
			if err != nil {
				b.Fatal(err)
			}
			if async {
				fr, err := c.FollowLogs(ctx, "bench", r.CmdID, io.Discard, io.Discard)
				code := fr.ExitCode
				if err != nil || code == nil || *code != 0 {
					b.Fatalf("follow: %v %v", code, err)
				}
			}
		}
		if base > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x-os-exec")
		}
	}
	b.Run("round-trip", func(b *testing.B) { run(b, "version") })
	b.Run("session-sync", func(b *testing.B) { run(b, "sync") })
	b.Run("session-sync-stateless", func(b *testing.B) { run(b, "stateless") })
	b.Run("session-async-follow", func(b *testing.B) { run(b, "async") })
}

// A sync exec with Tail keeps the last n bytes of each stream and counts
// the rest, whether the server sends only those (the binary extension) or
// everything as JSON (a plain Daytona daemon: the client cuts).
func TestDaemonSessionExecuteTail(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			c, ctx := sessionEnv(t, mode, "s")
			r, err := c.SessionExecuteWith(ctx, "s", toolbox.SessionExecuteRequest{Command: "printf 0123456789; printf ab >&2; " + mode.exit(4)},
				toolbox.SessionExecOptions{Tail: 3})
			if err != nil {
				t.Fatal(err)
			}
			wantOut, wantDropped, wantErr := "789", int64(7), "ab"
			if mode == daytona {
				// Daytona ends the last lines.
				wantOut, wantDropped, wantErr = "89\n", 8, "ab\n"
			}
			if r.Stdout != wantOut || r.StdoutDropped != wantDropped || r.Stderr != wantErr || r.StderrDropped != 0 || r.ExitCode == nil || *r.ExitCode != 4 || r.CmdID == "" {
				t.Fatalf("result %+v", r)
			}
			if _, err := c.SessionExecuteWith(ctx, "s", toolbox.SessionExecuteRequest{Command: "true"}, toolbox.SessionExecOptions{Tail: -1}); !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Fatalf("Tail -1: %v", err)
			}
		})
	}
}
