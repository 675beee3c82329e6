package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// A childReport is what a stream child prints.
type childReport struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	HWM     int64   `json:"hwm"` // VmHWM at the end, bytes
}

// counter counts what is written to it.
type counter struct{ n atomic.Int64 }

func (c *counter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// runChild is a re-executed stream child: it streams -stream-mib MiB from
// `head -c N /dev/zero`, through the sandbox's ExecuteCommand with a
// Stdout writer and the default retention ("sandbox") or through os/exec's
// pipe ("pipe"), and prints a childReport.
func runChild(c config, stdout, stderr io.Writer) int {
	size := int64(c.streamMiB) << 20
	ctx := context.Background()
	var w counter
	t := time.Now()
	var err error
	switch c.child {
	case "sandbox":
		err = streamSandbox(ctx, c, size, &w)
	case "pipe":
		cmd := exec.CommandContext(ctx, "head", "-c", strconv.FormatInt(size, 10), "/dev/zero")
		cmd.Stdout = &w
		err = cmd.Run()
	default:
		err = fmt.Errorf("-child %q: use sandbox or pipe", c.child)
	}
	secs := time.Since(t).Seconds()
	if err == nil && w.n.Load() != size {
		err = fmt.Errorf("streamed %d bytes, want %d", w.n.Load(), size)
	}
	hwm, herr := vmHWM()
	if err == nil {
		err = herr
	}
	if err != nil {
		fmt.Fprintln(stderr, "fastbench child:", err)
		return 1
	}
	_ = json.NewEncoder(stdout).Encode(childReport{Bytes: size, Seconds: secs, HWM: hwm})
	return 0
}

// streamSandbox runs head in the sandbox c.sandboxID, streaming to w.
func streamSandbox(ctx context.Context, c config, size int64, w io.Writer) error {
	sb, err := local.New(local.Options{ID: c.sandboxID, StateDir: c.stateDir})
	if err != nil {
		return err
	}
	r, err := sb.ExecuteCommand(ctx, "head", []string{"-c", strconv.FormatInt(size, 10), "/dev/zero"},
		&sandbox.ExecOptions{Stdout: w, Timeout: -1})
	switch {
	case err != nil:
		return err
	case r.ExitCode != 0:
		return fmt.Errorf("head exited %d: %s", r.ExitCode, firstLine(r.Stderr, 100))
	case int64(len(r.Stdout)) != size:
		return fmt.Errorf("the result retained %d bytes, want %d (default retention keeps all)", len(r.Stdout), size)
	}
	return nil
}

// child re-executes this program as a stream child of role.
func (b *bench) child(role string, run *running) (childReport, error) {
	self, err := os.Executable()
	if err != nil {
		return childReport{}, err
	}
	cmd := exec.CommandContext(b.ctx, self, "-child", role, "-stream-mib", strconv.Itoa(b.c.streamMiB),
		"-state-dir", run.stateDir, "-sandbox-id", run.id)
	cmd.Stderr = b.log
	out, err := cmd.Output()
	if err != nil {
		return childReport{}, fmt.Errorf("child %s: %w", role, err)
	}
	var rep childReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return childReport{}, fmt.Errorf("child %s: %w", role, err)
	}
	return rep, nil
}

// streamRounds bounds the stream row's rounds: each moves -stream-mib twice.
const streamRounds = 5

// rowStream: -stream-mib MiB streamed through ExecuteCommand's Stdout
// writer with the default retention, in a child process each time, against
// the same through os/exec's pipe: throughput, and the child's peak RSS
// against the output's size.
func (b *bench) rowStream() []Result {
	peakGoal := Goal{Of: "op", Cmp: "<=", Limit: float64(b.c.streamMiB + 64), Text: "≤ output + 64 MiB"}
	fail := func(err error) []Result {
		return []Result{failed("stream", figStreamTP, goalStreamTP, err), failed("stream", figStreamPeak, peakGoal, err)}
	}
	run, err := b.running()
	if err != nil {
		return fail(err)
	}
	n := min(b.c.rounds, streamRounds)
	var tp, tpBase, peak, peakPipe []float64
	for i := 0; i < n; i++ {
		s, err := b.child("sandbox", run)
		if err != nil {
			return fail(err)
		}
		p, err := b.child("pipe", run)
		if err != nil {
			return fail(fmt.Errorf("baseline: %w", err))
		}
		tp, tpBase = append(tp, float64(s.Bytes)/1e6/s.Seconds), append(tpBase, float64(p.Bytes)/1e6/p.Seconds)
		peak, peakPipe = append(peak, float64(s.HWM)/(1<<20)), append(peakPipe, float64(p.HWM)/(1<<20))
	}
	note := fmt.Sprintf("%d rounds, each in a new child process (re-executed harness); the sandbox's `head -c %d MiB /dev/zero` to a counting Stdout writer", n, b.c.streamMiB)
	if run.note != "" {
		note += "; " + run.note
	}
	out := float64(b.c.streamMiB)
	sizes := make([]float64, n)
	for i := range sizes {
		sizes[i] = out
	}
	rt := Result{Row: "stream", Figure: figStreamTP, Unit: "MB/s", Goal: goalStreamTP, Note: note, OpSamples: tp, BaseSamples: tpBase,
		Baseline: "os/exec `head -c` through its pipe"}
	rp := Result{Row: "stream", Figure: figStreamPeak, Unit: "MiB", Goal: peakGoal, Note: note, OpSamples: peak, BaseSamples: sizes,
		Baseline: "output size", Extra: map[string]any{"pipeChildHWMMiB": peakPipe}}
	rt.finish()
	rp.finish()
	return []Result{rt, rp}
}
