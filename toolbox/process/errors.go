package process

import (
	"github.com/agentbox-dev/agentbox/sandbox"
)

// toolboxError wraps a failed toolbox request with what the Manager was
// doing. It never includes the command or its environment (they may hold
// secrets).
//
// When the Host reported the sandbox stopping, stopped, being destroyed or
// destroyed as the request failed (see Manager.fail), the failure is put
// down to that: the error matches sandbox.ErrNotReady, and
// sandbox.ErrDestroyed for a destroyed sandbox.
type toolboxError struct {
	op     string
	err    error
	status sandbox.Status // the sandbox's status when it was going away, else empty
}

func (e *toolboxError) Error() string {
	if e.status != "" {
		return "process: " + e.op + ": the sandbox is " + string(e.status) + ": " + e.err.Error()
	}
	return "process: " + e.op + ": " + e.err.Error()
}

func (e *toolboxError) Unwrap() error { return e.err }

// Is reports whether target is sandbox.ErrNotReady (the sandbox was going
// away) or sandbox.ErrDestroyed (it was being destroyed).
func (e *toolboxError) Is(target error) bool {
	switch target {
	case sandbox.ErrNotReady:
		return e.status != ""
	case sandbox.ErrDestroyed:
		return e.status == sandbox.StatusDestroying || e.status == sandbox.StatusDestroyed
	}
	return false
}

// StatusHost is a Host that also knows the status of its sandbox, as
// *sandbox.Lifecycle does. A Manager whose Host implements it puts a
// request that fails while the sandbox is stopping, stopped, being
// destroyed or destroyed down to that: the command's error (or a
// process's Wait error) matches sandbox.ErrNotReady, and
// sandbox.ErrDestroyed when the sandbox was destroyed, rather than
// reporting the connection error or missing session the toolbox gave.
type StatusHost interface {
	Host
	// Status returns the sandbox's current status.
	Status() sandbox.Status
}

// goingAway returns the status of the Host's sandbox when it is stopping,
// stopped, being destroyed or destroyed, and "" otherwise (or when the
// Host does not report its status).
func (m *Manager) goingAway() sandbox.Status {
	h, ok := m.host.(StatusHost)
	if !ok {
		return ""
	}
	switch st := h.Status(); st {
	case sandbox.StatusStopping, sandbox.StatusStopped, sandbox.StatusDestroying, sandbox.StatusDestroyed:
		return st
	}
	return ""
}

// fail wraps the failure of a toolbox request made for op.
func (m *Manager) fail(op string, err error) *toolboxError {
	return &toolboxError{op: op, err: err, status: m.goingAway()}
}
