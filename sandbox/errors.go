package sandbox

import (
	"errors"
	"fmt"
)

// Sentinel errors, checkable with errors.Is.
var (
	// ErrNotReady: the sandbox is not running and could not be started.
	ErrNotReady = errors.New("sandbox is not ready")
	// ErrDestroyed: the sandbox was destroyed and cannot be used again.
	ErrDestroyed = errors.New("sandbox is destroyed")
	// ErrUnsupported: the engine does not offer the feature.
	ErrUnsupported = errors.New("not supported by this sandbox")
	// ErrNotFound: no sandbox, process or file with that name.
	ErrNotFound = errors.New("not found")
	// ErrExited: the process has already exited.
	ErrExited = errors.New("process has already exited")
	// ErrInvalidEnv: an environment variable name is not a shell name.
	ErrInvalidEnv = errors.New("invalid environment variable name")
	// ErrInvalidArgument: an option has an invalid value.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrIsolationUnavailable: the host cannot isolate a sandbox.
	ErrIsolationUnavailable = errors.New("isolation unavailable")
	// ErrInvalidState: the sandbox's state does not allow the operation,
	// e.g. a pause of a stopped sandbox or a fork of one being destroyed.
	ErrInvalidState = errors.New("sandbox is not in a state that allows this")
)

// NotReadyError reports that a sandbox is not ready. It matches ErrNotReady.
type NotReadyError struct {
	ID  string
	Err error // the cause, if any
}

func (e *NotReadyError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sandbox is not ready: %s: %v", e.ID, e.Err)
	}
	return "sandbox is not ready: " + e.ID
}

// Is reports whether target is ErrNotReady.
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }

// Unwrap returns the cause.
func (e *NotReadyError) Unwrap() error { return e.Err }

// HookError reports that an OnStart, OnStop or OnDestroy hook failed.
type HookError struct {
	ID   string
	Hook string // "onStart", "onStop" or "onDestroy"
	Err  error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("sandbox %q %s hook failed: %v", e.ID, e.Hook, e.Err)
}

// Unwrap returns the hook's error.
func (e *HookError) Unwrap() error { return e.Err }
