package process

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Round trips of streaming commands against the daemon's Daytona-behaviour
// mode, counted by the client's transport (every request, WebSocket
// handshakes included). Request counts are behaviour: the bounds are the
// issue's goals.

// longWaiterGrace makes a follow wait for the waiter as long as it takes,
// so that what a short command costs does not depend on the machine's
// load: the default grace (100 ms) is timing.
func longWaiterGrace(t *testing.T) {
	old := waiterGrace
	waiterGrace = time.Minute
	t.Cleanup(func() { waiterGrace = old })
}

// A streaming `true` costs at most 3 requests on Daytona's daemon: the
// async exec, the waiter (a sync exec answered when the command ended,
// with its exit code) and one read of the whole log; no socket, no look
// at the command.
func TestDaytonaStreamingTrueRequests(t *testing.T) {
	longWaiterGrace(t)
	h := newHarness(t, harnessOptions{plain: true, daytona: true})
	h.warm(t)
	for i := range 5 {
		var out syncBuffer
		r := h.exec(t, "true", nil, &sandbox.ExecOptions{Stdout: &out})
		if r.ExitCode != 0 || r.Stdout != "" {
			t.Fatalf("result = %+v", r)
		}
		if n, log := h.requests(); n > 3 {
			t.Errorf("run %d: streaming true made %d requests, want at most 3: %q", i, n, log)
		}
	}
}

// A 10 s stream printing every 100 ms costs at most 5 requests: none of
// them a look at the command per output or per few milliseconds.
func TestDaytonaLongStreamRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s stream")
	}
	h := newHarness(t, harnessOptions{plain: true, daytona: true})
	h.warm(t)
	var out syncBuffer
	r := h.exec(t, "for i in $(seq 100); do echo $i; sleep 0.1; done; exit 3", nil, &sandbox.ExecOptions{Stdout: &out})
	if r.ExitCode != 3 || strings.Count(r.Stdout, "\n") != 100 || out.String() != r.Stdout {
		t.Fatalf("result = %+v, streamed %d bytes", r, len(out.String()))
	}
	if n, log := h.requests(); n > 5 {
		t.Errorf("a 10 s stream made %d requests, want at most 5: %d looks at the command, %q", n, looks(log), log[:min(len(log), 8)])
	}
}

// looks counts the GET …/command/{id} in log.
func looks(log []string) int {
	n := 0
	for _, r := range log {
		if strings.HasPrefix(r, "GET ") && strings.Contains(r, "/command/") && !strings.HasSuffix(r, "/logs") {
			n++
		}
	}
	return n
}

// A 5 MiB stream costs at most 5 requests and arrives exact: the socket
// brings it, the waiter the exit code, one read by offset what the socket
// had not brought when the follow left it.
func TestDaytonaBigStreamRequests(t *testing.T) {
	h := newHarness(t, harnessOptions{plain: true, daytona: true})
	h.warm(t)
	const size = 5 << 20
	var out syncBuffer
	r := h.exec(t, fmt.Sprintf("yes 0123456789abcdef | head -c %d; exit 5", size), nil, &sandbox.ExecOptions{Stdout: &out})
	want := strings.Repeat("0123456789abcdef\n", size/17+1)[:size] + "\n" // Daytona ends the last line
	if r.ExitCode != 5 || r.Stdout != want || out.String() != want {
		t.Fatalf("exit %d, stdout %d bytes, streamed %d, want %d", r.ExitCode, len(r.Stdout), len(out.String()), len(want))
	}
	if n, log := h.requests(); n > 5 {
		t.Errorf("a 5 MiB stream made %d requests, want at most 5: %d looks, %q", n, looks(log), log[:min(len(log), 8)])
	}
}

// BenchmarkDaytonaStreamExit measures, on the Daytona-behaviour mode, how
// long after its command's end a streamed Execute returns: each round runs
// `sleep 0.2` once synchronously (the baseline: one request answered when
// the command ended) and once streamed; exit-lag-ms is the streamed run's
// extra time, reqs/op the streamed run's requests.
func BenchmarkDaytonaStreamExit(b *testing.B) {
	h := newHarness(b, harnessOptions{plain: true, daytona: true})
	h.warm(b)
	const cmd = "sleep 0.2; echo done"
	var syncT, streamT time.Duration
	var reqs int64
	for b.Loop() {
		start := time.Now()
		h.exec(b, cmd, nil, nil)
		syncT += time.Since(start)
		h.requests()
		start = time.Now()
		r := h.exec(b, cmd, nil, &sandbox.ExecOptions{Stdout: &syncBuffer{}})
		streamT += time.Since(start)
		n, _ := h.requests()
		reqs += n
		if r.Stdout != "done\n" {
			b.Fatalf("stdout %q", r.Stdout)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(syncT.Milliseconds())/n, "sync-ms")
	b.ReportMetric(float64(streamT.Milliseconds())/n, "stream-ms")
	b.ReportMetric(float64((streamT-syncT).Milliseconds())/n, "exit-lag-ms")
	b.ReportMetric(float64(reqs)/n, "reqs/op")
}
