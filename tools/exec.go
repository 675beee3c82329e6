package tools

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// ExecuteInput is the input of execute_command.
type ExecuteInput struct {
	// Command is a shell command line.
	Command string `json:"command"`
	// Timeout is in seconds; 0 or absent means the sandbox's default for
	// a foreground command and none for a background one.
	Timeout float64 `json:"timeout,omitempty"`
	// Cwd is the working directory, relative to the workspace's.
	Cwd string `json:"cwd,omitempty"`
	// Env adds environment variables.
	Env map[string]string `json:"env,omitempty"`
	// Background starts the command and returns its process id at once.
	Background bool `json:"background,omitempty"`
}

// ExecuteOutput is the output of execute_command.
type ExecuteOutput struct {
	// PID is the process id of a background command.
	PID string `json:"pid,omitempty"`
	// The fields below describe a foreground command that ended.
	ExitCode   int     `json:"exitCode"`
	Stdout     string  `json:"stdout,omitempty"`
	Stderr     string  `json:"stderr,omitempty"`
	TimedOut   bool    `json:"timedOut,omitempty"`
	Killed     bool    `json:"killed,omitempty"`
	DurationMS float64 `json:"durationMs,omitempty"`
	// Truncated reports that Stdout or Stderr is bounded: Handle then
	// reads the whole output with read_output, and StdoutBytes and
	// StderrBytes give the full sizes.
	Truncated   bool   `json:"truncated,omitempty"`
	Handle      string `json:"handle,omitempty"`
	StdoutBytes int64  `json:"stdoutBytes"`
	StderrBytes int64  `json:"stderrBytes"`
}

// Execute runs in.Command (execute_command): in the foreground it waits
// and returns the bounded output; in the background it starts the command
// and returns its process id.
func (s *Set) Execute(ctx context.Context, in ExecuteInput, o *CallOptions) (*ExecuteOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, invalid("command is empty: give a shell command line, e.g. \"ls -la\"")
	}
	if in.Timeout < 0 || in.Timeout > math.MaxInt32 {
		return nil, invalid("timeout %v is out of range: give a number of seconds above 0, or leave it out", in.Timeout)
	}
	if err := s.approve(ctx, o, Action{Tool: "execute_command", Kind: ActionCommand, Command: in.Command, Cwd: in.Cwd, Background: in.Background}); err != nil {
		return nil, err
	}
	opts := &sandbox.ExecOptions{Timeout: time.Duration(in.Timeout * float64(time.Second)), Cwd: in.Cwd, Env: in.Env}
	if in.Background {
		return s.spawn(ctx, in.Command, opts)
	}
	opts.MaxRetainedBytes = s.cfg.MaxRetainedBytes
	pr := newProgressReporter(s.cfg.ProgressInterval, o.progress())
	if pr != nil {
		opts.Stdout, opts.Stderr = pr.writer(), pr.writer()
		defer pr.stop()
	}
	res, err := s.ws.ExecuteCommand(ctx, in.Command, nil, opts)
	if err != nil {
		return nil, err
	}
	out := &ExecuteOutput{
		ExitCode: res.ExitCode, TimedOut: res.TimedOut, Killed: res.Killed,
		DurationMS:  float64(res.Duration.Microseconds()) / 1000,
		StdoutBytes: int64(len(res.Stdout)) + res.StdoutDroppedBytes,
		StderrBytes: int64(len(res.Stderr)) + res.StderrDroppedBytes,
	}
	var handle string
	more := func(stream string) func(int) string {
		return func(head int) string {
			if handle == "" {
				handle = s.outputs.put(&storedOutput{command: in.Command, stdout: res.Stdout, stderr: res.Stderr, droppedOut: res.StdoutDroppedBytes, droppedErr: res.StderrDroppedBytes})
			}
			return fmt.Sprintf("Read the rest with read_output {\"handle\":%q,\"stream\":%q,\"offset\":%d}", handle, stream, head)
		}
	}
	var t1, t2 bool
	out.Stdout, t1 = bound(res.Stdout, s.cfg.MaxOutputBytes, more("stdout"))
	out.Stderr, t2 = bound(res.Stderr, s.cfg.MaxOutputBytes, more("stderr"))
	out.Truncated = t1 || t2 || res.StdoutDroppedBytes > 0 || res.StderrDroppedBytes > 0
	out.Handle = handle
	return out, nil
}

// ansiEscape matches the terminal escape sequences (colors, cursor moves)
// stripped from the text a model reads.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

// stripANSI removes terminal escape sequences from s.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return ansiEscape.ReplaceAllString(s, "")
}

func renderExecute(o *ExecuteOutput) string {
	if o.PID != "" {
		return fmt.Sprintf("Started background process %s. Poll its output with process_output {\"pid\":%q,\"cursor\":0}; stop it with process_kill.", o.PID, o.PID)
	}
	var b strings.Builder
	switch {
	case o.Stdout != "" && o.Stderr != "":
		fmt.Fprintf(&b, "stdout:\n%s\n\nstderr:\n%s", o.Stdout, o.Stderr)
	case o.Stderr != "":
		fmt.Fprintf(&b, "stderr:\n%s", o.Stderr)
	case o.Stdout != "":
		b.WriteString(o.Stdout)
	default:
		b.WriteString("(no output)")
	}
	var notes []string
	if o.TimedOut {
		notes = append(notes, "The command timed out and was killed.")
	}
	if o.ExitCode != 0 {
		notes = append(notes, fmt.Sprintf("Exit code: %d", o.ExitCode))
	}
	if o.Truncated && o.Handle == "" {
		notes = append(notes, "(The oldest output was dropped: only the last part was kept.)")
	}
	text := stripANSI(b.String())
	if len(notes) > 0 {
		text = strings.TrimRight(text, "\n") + "\n\n" + strings.Join(notes, "\n")
	}
	return text
}

// progressReporter counts a command's output and reports progress every
// interval until stopped.
type progressReporter struct {
	report func(Progress)
	start  time.Time
	mu     sync.Mutex
	bytes  int64
	last   string // the last complete line
	part   []byte // the line being written
	done   chan struct{}
	wg     sync.WaitGroup
}

func newProgressReporter(every time.Duration, report func(Progress)) *progressReporter {
	if report == nil {
		return nil
	}
	p := &progressReporter{report: report, start: time.Now(), done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.mu.Lock()
				pr := Progress{Elapsed: time.Since(p.start), Bytes: p.bytes, LastLine: p.last}
				p.mu.Unlock()
				p.report(pr)
			}
		}
	}()
	return p
}

func (p *progressReporter) stop() {
	close(p.done)
	p.wg.Wait()
}

func (p *progressReporter) writer() *progressWriter { return &progressWriter{p} }

type progressWriter struct{ p *progressReporter }

// maxLastLine bounds the line a progress report carries.
const maxLastLine = 200

func (w *progressWriter) Write(b []byte) (int, error) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes += int64(len(b))
	data := b
	if i := strings.LastIndexByte(string(data), '\n'); i >= 0 {
		line := append(p.part, data[:i]...)
		if j := strings.LastIndexByte(string(line), '\n'); j >= 0 {
			line = line[j+1:]
		}
		if len(line) > maxLastLine {
			line = line[len(line)-maxLastLine:]
		}
		p.last = strings.ToValidUTF8(string(line), "")
		p.part = p.part[:0]
		data = data[i+1:]
	}
	if len(p.part)+len(data) <= maxLastLine {
		p.part = append(p.part, data...)
	}
	return len(b), nil
}

// ReadOutputInput is the input of read_output.
type ReadOutputInput struct {
	Handle string `json:"handle"`
	// Stream is "stdout" (the default) or "stderr".
	Stream string `json:"stream,omitempty"`
	// Offset is the byte offset to read from.
	Offset int64 `json:"offset,omitempty"`
	// Length is how many bytes to read at most (Config.MaxOutputBytes by
	// default, and at most).
	Length int `json:"length,omitempty"`
}

// ReadOutputOutput is a page of a stored output.
type ReadOutputOutput struct {
	Data string `json:"data"`
	// Offset is where Data starts; NextOffset where the next page starts;
	// Total the stream's size.
	Offset     int64 `json:"offset"`
	NextOffset int64 `json:"nextOffset"`
	Total      int64 `json:"total"`
	EOF        bool  `json:"eof"`
	// Dropped counts the bytes at the start of the stream that were not
	// kept (Config.MaxRetainedBytes): offsets below it cannot be read.
	Dropped int64 `json:"dropped,omitempty"`
}

// ReadOutput returns a page of the whole output of a command whose
// result was truncated (read_output).
func (s *Set) ReadOutput(_ context.Context, in ReadOutputInput, _ *CallOptions) (*ReadOutputOutput, error) {
	st, ok := s.outputs.get(in.Handle)
	if !ok {
		return nil, invalid("no output has the handle %q (only the last %d truncated outputs are kept)", in.Handle, s.cfg.StoredOutputs)
	}
	data, dropped := st.stdout, st.droppedOut
	switch in.Stream {
	case "", "stdout":
	case "stderr":
		data, dropped = st.stderr, st.droppedErr
	default:
		return nil, invalid("stream %q is neither stdout nor stderr", in.Stream)
	}
	n := in.Length
	if n <= 0 || n > s.cfg.MaxOutputBytes {
		n = s.cfg.MaxOutputBytes
	}
	total := int64(len(data)) + dropped
	off := in.Offset
	if off < dropped {
		off = dropped
	}
	if off > total {
		return nil, invalid("offset %d is past the end of the output (%d bytes)", in.Offset, total)
	}
	i := int(off - dropped)
	j := min(i+n, len(data))
	return &ReadOutputOutput{Data: data[i:j], Offset: off, NextOffset: off + int64(j-i), Total: total, EOF: j == len(data), Dropped: dropped}, nil
}

func renderReadOutput(o *ReadOutputOutput) string {
	s := o.Data
	if o.EOF {
		s += fmt.Sprintf("\n[end of output: bytes %d-%d of %d]", o.Offset, o.NextOffset, o.Total)
	} else {
		s += fmt.Sprintf("\n[bytes %d-%d of %d; continue with offset %d]", o.Offset, o.NextOffset, o.Total, o.NextOffset)
	}
	if o.Dropped > 0 {
		s += fmt.Sprintf("\n[the first %d bytes were not kept]", o.Dropped)
	}
	return s
}
