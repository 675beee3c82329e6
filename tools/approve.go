package tools

import (
	"context"
	"errors"
	"fmt"
)

// ActionKind is what an approval is asked for.
type ActionKind string

// Action kinds.
const (
	// ActionCommand runs a command (in the foreground or the background).
	ActionCommand ActionKind = "command"
	// ActionStdin writes to a background process's standard input.
	ActionStdin ActionKind = "stdin"
	// ActionWrite creates or changes a file (write_file, edit_file).
	ActionWrite ActionKind = "write"
	// ActionDelete deletes a file or folder.
	ActionDelete ActionKind = "delete"
)

// Action is what a tool is about to do, shown to an approval gate.
type Action struct {
	// Tool is the name of the tool asking.
	Tool string     `json:"tool"`
	Kind ActionKind `json:"kind"`
	// Command is the command line (ActionCommand), or the data
	// (ActionStdin).
	Command string `json:"command,omitempty"`
	// Cwd is the command's working directory as given ("" for the
	// default).
	Cwd string `json:"cwd,omitempty"`
	// Background reports a command started in the background.
	Background bool `json:"background,omitempty"`
	// PID is the background process (ActionStdin).
	PID string `json:"pid,omitempty"`
	// Path is the absolute path of the file (ActionWrite, ActionDelete).
	Path string `json:"path,omitempty"`
}

// String describes the action in words, e.g. for a person asked to
// approve it.
func (a Action) String() string {
	switch a.Kind {
	case ActionCommand:
		s := "run the command " + quoteForHuman(a.Command)
		if a.Background {
			s = "start the background command " + quoteForHuman(a.Command)
		}
		if a.Cwd != "" {
			s += " in " + a.Cwd
		}
		return s
	case ActionStdin:
		return fmt.Sprintf("write %s to the standard input of process %s", quoteForHuman(a.Command), a.PID)
	case ActionWrite:
		return "write the file " + a.Path
	case ActionDelete:
		return "delete " + a.Path
	}
	return string(a.Kind)
}

func quoteForHuman(s string) string {
	const max = 500
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// ApproveFunc decides whether an action may happen: nil lets it, an error
// refuses it and says why. It runs before the action, in the tool call's
// goroutine, and may block (to ask a person); ctx ends with the call.
type ApproveFunc func(ctx context.Context, a Action) error

// ErrRefused matches the error of an action an approval gate refused.
var ErrRefused = errors.New("refused by the approval gate")

// RefusedError is the error of an action an approval gate refused. It
// matches ErrRefused.
type RefusedError struct {
	Action Action
	// Reason is the gate's error.
	Reason error
}

// Error says what was refused and why.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("not allowed to %s: %v", e.Action, e.Reason)
}

// Unwrap returns the gate's error.
func (e *RefusedError) Unwrap() error { return e.Reason }

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// approve runs the set's gate, then the call's.
func (s *Set) approve(ctx context.Context, o *CallOptions, a Action) error {
	for _, f := range []ApproveFunc{s.cfg.Approve, o.approve()} {
		if f == nil {
			continue
		}
		if err := f(ctx, a); err != nil {
			if errors.Is(err, ErrRefused) {
				return err
			}
			return &RefusedError{Action: a, Reason: err}
		}
	}
	return nil
}
