package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// compare runs the baseline and the measured operation alternately, so
// that machine load affects both alike, and reports measured/baseline as
// "x-os/exec" (lower is better).
func compare(b *testing.B, op func(i int)) {
	b.Helper()
	var base, meas time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		base += time.Since(start)
		start = time.Now()
		op(i)
		meas += time.Since(start)
	}
	b.ReportMetric(float64(meas)/float64(base), "x-os/exec")
	b.ReportMetric(float64(meas.Microseconds())/float64(b.N), "µs/cmd")
	b.ReportMetric(float64(base.Microseconds())/float64(b.N), "os/exec-µs/op")
}

// BenchmarkSessionExecSync: one synchronous session command (`true`) over
// HTTP on a unix socket, against os/exec of `sh -c true`.
func BenchmarkSessionExecSync(b *testing.B) {
	e := newEnv(b, false)
	e.createSession("bench")
	compare(b, func(int) { e.execSync("bench", "true") })
}

// BenchmarkSessionExecStateless is BenchmarkSessionExecSync with the
// stateless extension (no shell state saved).
func BenchmarkSessionExecStateless(b *testing.B) {
	e := newEnv(b, false)
	e.createSession("bench")
	compare(b, func(int) { e.execSync("bench", "true", toolbox.HeaderUseExtensions, "stateless") })
}

// BenchmarkExecute: one POST /process/execute of `true`.
func BenchmarkExecute(b *testing.B) {
	e := newEnv(b, false)
	compare(b, func(int) {
		e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{Command: "true"})
	})
}

// BenchmarkAsyncFollow: the path Mastra takes per command (async exec, then
// a WebSocket follow until the close, whose frames reason carries the exit
// code), for `true`.
func BenchmarkAsyncFollow(b *testing.B) {
	e := newEnv(b, false)
	e.createSession("bench")
	ctx := context.Background()
	hdr := http.Header{toolbox.HeaderUseExtensions: {"frames"}}
	compare(b, func(int) {
		cid := e.execAsync("bench", toolbox.SessionExecuteRequest{Command: "true", RunAsync: true})
		c, _ := e.dial(ctx, "bench", cid, true, hdr)
		for {
			if _, _, err := c.Read(ctx); err != nil {
				break
			}
		}
		c.CloseNow()
	})
}

// BenchmarkStdoutThroughput streams 64 MiB of stdout through a session
// command and a frames follower, as a ratio to reading it from a pipe with
// os/exec ("x-pipe-throughput", higher is better).
func BenchmarkStdoutThroughput(b *testing.B) {
	const n = 64 << 20
	e := newEnv(b, false)
	cmdline := fmt.Sprintf("head -c %d /dev/zero", n)
	ctx := context.Background()
	buf := make([]byte, 256<<10)
	var base, meas time.Duration
	b.SetBytes(n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cmd := exec.Command("sh", "-c", cmdline)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		got, _ := io.CopyBuffer(io.Discard, out, buf)
		cmd.Wait()
		if got != n {
			b.Fatalf("pipe gave %d bytes", got)
		}
		base += time.Since(start)

		start = time.Now()
		// A fresh session each time: logs are kept until the session goes.
		sid := fmt.Sprintf("tp%d", i)
		e.createSession(sid)
		cid := e.execAsync(sid, toolbox.SessionExecuteRequest{Command: cmdline, RunAsync: true})
		c, _ := e.dial(ctx, sid, cid, true, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
		total := 0
		for {
			_, r, err := c.Reader(ctx)
			if err != nil {
				break
			}
			k, _ := io.CopyBuffer(io.Discard, r, buf)
			total += int(k) - 1
		}
		c.CloseNow()
		meas += time.Since(start)
		e.expect(204, "DELETE", "/process/session/"+sid, nil)
		if total != n {
			b.Fatalf("got %d bytes", total)
		}
	}
	b.ReportMetric(float64(base)/float64(meas), "x-pipe-throughput")
}

// BenchmarkInterpreter: the interpreter's round trip for `1+1` in a warm
// context (WebSocket dial, execution, result, close), against code-run of
// the same code (a new python3 each time) in the same loop: the ratio is
// "x-code-run" (lower is better).
func BenchmarkInterpreter(b *testing.B) {
	testenv.NeedTool(b, "python3", "python3")
	e := newEnv(b, false)
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: baseURL, HTTPClient: e.client})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	run := func() {
		r, err := c.RunCode(ctx, toolbox.InterpreterExecuteRequest{Code: "1+1"}, nil)
		if err != nil || r.Result != "2" {
			b.Fatalf("interpreter 1+1: %+v %v", r, err)
		}
	}
	run() // start the default context's interpreter
	var interp, coderun time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r, err := c.CodeRun(ctx, toolbox.CodeRunRequest{Code: "print(1+1)", Language: toolbox.LanguagePython})
		if err != nil || r.Result != "2\n" {
			b.Fatalf("code-run: %+v %v", r, err)
		}
		coderun += time.Since(start)
		start = time.Now()
		run()
		interp += time.Since(start)
	}
	b.ReportMetric(float64(interp)/float64(coderun), "x-code-run")
	b.ReportMetric(float64(interp.Microseconds())/float64(b.N), "interp-µs/op")
	b.ReportMetric(float64(coderun.Microseconds())/float64(b.N), "code-run-µs/op")
}
