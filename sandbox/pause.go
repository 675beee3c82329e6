package sandbox

import "context"

// StatusPaused: every process of the sandbox is frozen with its memory,
// sockets and open files kept; the next command or Start resumes it.
const StatusPaused Status = "paused"

// Pauser is implemented by sandboxes that can pause and resume while
// keeping their processes' memory (the local engine's cgroup freezer,
// Daytona's pause).
type Pauser interface {
	// Pause freezes every process of the running sandbox. Pause of a
	// paused sandbox does nothing; of a stopped one it fails with
	// ErrInvalidState; without the means to pause it fails with
	// ErrUnsupported.
	Pause(ctx context.Context) error
	// Resume lets the processes of a paused sandbox run on where they
	// were. Resume of a running sandbox does nothing; of a stopped one it
	// fails with ErrInvalidState.
	Resume(ctx context.Context) error
}
