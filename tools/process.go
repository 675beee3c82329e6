package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// procOutput is the combined output (stdout and stderr interleaved as
// they arrive) of a background process this set follows, and its exit.
type procOutput struct {
	proc sandbox.Process
	max  int

	mu       sync.Mutex
	buf      []byte
	base     int64         // the stream offset of buf[0]
	changed  chan struct{} // closed and replaced at each write and at exit
	exited   bool
	exitCode int
	waitErr  error
}

func newProcOutput(max int) *procOutput {
	return &procOutput{max: max, changed: make(chan struct{})}
}

func (p *procOutput) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	if over := len(p.buf) - p.max; over > 0 {
		p.buf = append(p.buf[:0], p.buf[over:]...)
		p.base += int64(over)
	}
	close(p.changed)
	p.changed = make(chan struct{})
	return len(b), nil
}

func (p *procOutput) setExit(code int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited, p.exitCode, p.waitErr = true, code, err
	close(p.changed)
	p.changed = make(chan struct{})
}

// follow waits for the process in the background and records its exit.
func (s *Set) follow(p *procOutput) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res, err := p.proc.Wait(s.ctx)
		if s.ctx.Err() != nil {
			return
		}
		code := -1
		if res != nil {
			code = res.ExitCode
		}
		p.setExit(code, err)
	}()
}

// track records a process to follow; false when the set is closed.
func (s *Set) track(pid string, p *procOutput) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.procs[pid] = p
	s.follow(p)
	return true
}

func (s *Set) spawn(ctx context.Context, command string, opts *sandbox.ExecOptions) (*ExecuteOutput, error) {
	if opts.Timeout == 0 {
		opts.Timeout = -1 // a background command runs until it ends or is killed
	}
	out := newProcOutput(s.cfg.MaxProcessOutput)
	opts.Stdout, opts.Stderr = out, out
	proc, err := s.ws.Spawn(ctx, command, opts)
	if err != nil {
		return nil, err
	}
	out.proc = proc
	if !s.track(proc.PID(), out) {
		_, _ = proc.Kill(context.WithoutCancel(ctx))
		return nil, errClosed
	}
	return &ExecuteOutput{PID: proc.PID()}, nil
}

// process returns the output of the process pid, attaching to it when
// this set does not follow it yet.
func (s *Set) process(ctx context.Context, pid string) (*procOutput, error) {
	if strings.TrimSpace(pid) == "" {
		return nil, invalid("pid is empty: give the id execute_command returned, or see process_list")
	}
	s.mu.Lock()
	p, ok := s.procs[pid]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	if err := s.ws.Start(ctx); err != nil {
		return nil, err
	}
	out := newProcOutput(s.cfg.MaxProcessOutput)
	proc, err := s.ws.Sandbox().Processes().Attach(ctx, pid, &sandbox.AttachOptions{Stdout: out, Stderr: out})
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, fmt.Errorf("no background process has the id %q; see process_list: %w", pid, err)
	}
	if err != nil {
		return nil, err
	}
	out.proc = proc
	s.mu.Lock()
	if p, ok := s.procs[pid]; ok { // attached concurrently
		s.mu.Unlock()
		return p, nil
	}
	s.mu.Unlock()
	if !s.track(pid, out) {
		return nil, errClosed
	}
	return out, nil
}

// ProcessOutputInput is the input of process_output.
type ProcessOutputInput struct {
	PID string `json:"pid"`
	// Cursor is the offset in the output to read from: 0 at first, then
	// the NextCursor of the previous call.
	Cursor int64 `json:"cursor,omitempty"`
	// Wait is how many seconds to wait for output past Cursor, or for the
	// exit, when there is none yet (at most 60).
	Wait float64 `json:"wait,omitempty"`
}

// ProcessOutputOutput is the output of a background process past a
// cursor.
type ProcessOutputOutput struct {
	PID    string `json:"pid"`
	Output string `json:"output"`
	// NextCursor is the Cursor of the next call.
	NextCursor int64 `json:"nextCursor"`
	// More reports output past NextCursor already there (Output was
	// bounded).
	More bool `json:"more,omitempty"`
	// Dropped counts bytes between the cursor and the oldest output kept
	// (the process wrote more than Config.MaxProcessOutput since).
	Dropped  int64 `json:"dropped,omitempty"`
	Running  bool  `json:"running"`
	ExitCode *int  `json:"exitCode,omitempty"`
}

// ProcessOutput returns what a background process wrote (stdout and
// stderr interleaved) past in.Cursor (process_output).
func (s *Set) ProcessOutput(ctx context.Context, in ProcessOutputInput, _ *CallOptions) (*ProcessOutputOutput, error) {
	if in.Cursor < 0 {
		return nil, invalid("cursor %d is negative", in.Cursor)
	}
	if in.Wait < 0 || in.Wait > maxWaitSeconds {
		return nil, invalid("wait %v is out of range: give 0 to %d seconds", in.Wait, maxWaitSeconds)
	}
	p, err := s.process(ctx, in.PID)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Duration(in.Wait * float64(time.Second)))
	for {
		p.mu.Lock()
		end := p.base + int64(len(p.buf))
		ready := end > in.Cursor || p.exited || !time.Now().Before(deadline)
		changed := p.changed
		if ready {
			defer p.mu.Unlock()
			return p.page(in.PID, in.Cursor, s.cfg.MaxOutputBytes), nil
		}
		p.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// page returns the output past cursor, at most max bytes; p.mu is held.
func (p *procOutput) page(pid string, cursor int64, max int) *ProcessOutputOutput {
	end := p.base + int64(len(p.buf))
	out := &ProcessOutputOutput{PID: pid, Running: !p.exited}
	if p.exited {
		code := p.exitCode
		out.ExitCode = &code
	}
	if cursor > end {
		cursor = end
	}
	if cursor < p.base {
		out.Dropped = p.base - cursor
		cursor = p.base
	}
	i := int(cursor - p.base)
	j := min(i+max, len(p.buf))
	for j < len(p.buf) && j > i && p.buf[j]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		j--
	}
	out.Output = string(p.buf[i:j])
	out.NextCursor = p.base + int64(j)
	out.More = j < len(p.buf)
	return out
}

func renderProcessOutput(o *ProcessOutputOutput) string {
	var b strings.Builder
	if o.Dropped > 0 {
		fmt.Fprintf(&b, "[%d bytes were dropped before this output: the process wrote more than is kept]\n", o.Dropped)
	}
	if o.Output == "" {
		b.WriteString("(no new output)")
	} else {
		b.WriteString(stripANSI(o.Output))
	}
	b.WriteString("\n\n")
	switch {
	case o.More:
		fmt.Fprintf(&b, "[more output is there: call again with cursor %d]", o.NextCursor)
	case o.Running:
		fmt.Fprintf(&b, "[process %s is running; next cursor: %d]", o.PID, o.NextCursor)
	default:
		fmt.Fprintf(&b, "[process %s exited with code %d; next cursor: %d]", o.PID, *o.ExitCode, o.NextCursor)
	}
	return b.String()
}

// ProcessStdinInput is the input of process_stdin.
type ProcessStdinInput struct {
	PID  string `json:"pid"`
	Data string `json:"data,omitempty"`
	// Close closes the standard input after Data, so the process reads
	// end of file.
	Close bool `json:"close,omitempty"`
}

// ProcessStdinOutput is the output of process_stdin.
type ProcessStdinOutput struct {
	PID    string `json:"pid"`
	Bytes  int    `json:"bytes"`
	Closed bool   `json:"closed,omitempty"`
}

// ProcessStdin writes to a background process's standard input
// (process_stdin).
func (s *Set) ProcessStdin(ctx context.Context, in ProcessStdinInput, o *CallOptions) (*ProcessStdinOutput, error) {
	if in.Data == "" && !in.Close {
		return nil, invalid("nothing to do: give data, or close: true")
	}
	p, err := s.process(ctx, in.PID)
	if err != nil {
		return nil, err
	}
	if err := s.approve(ctx, o, Action{Tool: "process_stdin", Kind: ActionStdin, PID: in.PID, Command: in.Data}); err != nil {
		return nil, err
	}
	if in.Data != "" {
		if err := p.proc.SendStdin(ctx, []byte(in.Data)); err != nil {
			return nil, err
		}
	}
	if in.Close {
		if err := p.proc.CloseStdin(ctx); err != nil {
			return nil, err
		}
	}
	return &ProcessStdinOutput{PID: in.PID, Bytes: len(in.Data), Closed: in.Close}, nil
}

func renderProcessStdin(o *ProcessStdinOutput) string {
	s := fmt.Sprintf("Wrote %d bytes to the standard input of process %s.", o.Bytes, o.PID)
	if o.Closed {
		s += " Its standard input is closed."
	}
	return s
}

// ProcessKillInput is the input of process_kill.
type ProcessKillInput struct {
	PID string `json:"pid"`
}

// ProcessKillOutput is the output of process_kill.
type ProcessKillOutput struct {
	PID string `json:"pid"`
	// Killed is false when the process had already exited.
	Killed bool `json:"killed"`
}

// ProcessKill kills a background process and its children (process_kill).
func (s *Set) ProcessKill(ctx context.Context, in ProcessKillInput, _ *CallOptions) (*ProcessKillOutput, error) {
	if strings.TrimSpace(in.PID) == "" {
		return nil, invalid("pid is empty: give the id execute_command returned, or see process_list")
	}
	if err := s.ws.Start(ctx); err != nil {
		return nil, err
	}
	ok, err := s.ws.Sandbox().Processes().Kill(ctx, in.PID)
	if err != nil {
		return nil, err
	}
	return &ProcessKillOutput{PID: in.PID, Killed: ok}, nil
}

func renderProcessKill(o *ProcessKillOutput) string {
	if !o.Killed {
		return fmt.Sprintf("Process %s was not found or had already exited.", o.PID)
	}
	return fmt.Sprintf("Process %s has been killed.", o.PID)
}

// ProcessListOutput is the output of process_list.
type ProcessListOutput struct {
	Processes []sandbox.ProcessInfo `json:"processes"`
}

// ProcessList lists the sandbox's background processes (process_list).
func (s *Set) ProcessList(ctx context.Context, _ struct{}, _ *CallOptions) (*ProcessListOutput, error) {
	if err := s.ws.Start(ctx); err != nil {
		return nil, err
	}
	list, err := s.ws.Sandbox().Processes().List(ctx)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []sandbox.ProcessInfo{}
	}
	return &ProcessListOutput{Processes: list}, nil
}

func renderProcessList(o *ProcessListOutput) string {
	if len(o.Processes) == 0 {
		return "No background processes."
	}
	var b strings.Builder
	for _, p := range o.Processes {
		state := "running"
		if !p.Running {
			state = "exited"
			if p.ExitCode != nil {
				state = fmt.Sprintf("exited %d", *p.ExitCode)
			}
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\n", p.PID, state, p.Command)
	}
	return b.String()
}
