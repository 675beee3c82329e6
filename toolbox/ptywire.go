package toolbox

import (
	"encoding/json"
	"fmt"
)

// Wire types and vocabulary of PTY sessions (/process/pty): interactive
// terminals whose input and output travel over a WebSocket
// (docs/protocol.md, "PTY sessions").

// PtyCreateRequest is the body of POST /process/pty. Zero Cols and Rows
// mean 80×24; an empty Cwd means the server's work dir.
type PtyCreateRequest struct {
	ID   string            `json:"id"`
	Cwd  string            `json:"cwd,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cols int               `json:"cols,omitempty"`
	Rows int               `json:"rows,omitempty"`
	// LazyStart starts the shell when the first client connects rather
	// than at once, so that the client sees everything it prints.
	LazyStart bool `json:"lazyStart,omitempty"`
	// Command, an agentbox extension (ExtPtyCommand), is a shell command
	// line the terminal runs instead of an interactive shell; the session
	// ends when it exits. Daytona's servers ignore it.
	Command string `json:"command,omitempty"`
}

// PtyCreateResponse is the answer of POST /process/pty.
type PtyCreateResponse struct {
	SessionID string `json:"sessionId"`
}

// PtySessionInfo describes a PTY session.
type PtySessionInfo struct {
	ID   string            `json:"id"`
	Cwd  string            `json:"cwd"`
	Envs map[string]string `json:"envs"`
	Cols int               `json:"cols"`
	Rows int               `json:"rows"`
	// CreatedAt is an RFC 3339 time.
	CreatedAt string `json:"createdAt"`
	// Active is true while the terminal's process runs.
	Active    bool `json:"active"`
	LazyStart bool `json:"lazyStart"`
	// ExitCode, sent by agentbox servers only, is the exit code of the
	// terminal's process once it ended (128+N after signal N); Daytona's
	// servers forget a session whose process ended.
	ExitCode *int `json:"exitCode,omitempty"`
}

// PtyListResponse is the answer of GET /process/pty.
type PtyListResponse struct {
	Sessions []PtySessionInfo `json:"sessions"`
}

// PtyResizeRequest is the body of POST /process/pty/{id}/resize; both are
// between 1 and MaxPtySize.
type PtyResizeRequest struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// MaxPtySize is the largest number of columns or rows of a terminal.
const MaxPtySize = 1000

// PtyExitControlSubprotocol is the WebSocket subprotocol with which a
// client of a PTY session asks for the "exited" control message.
const PtyExitControlSubprotocol = "X-Daytona-Pty-Exit-Control"

// ExtPtyCommand is the agentbox extension that lets POST /process/pty run
// a command line (PtyCreateRequest.Command) instead of an interactive
// shell. Servers offer it in HeaderExtensions; the field is the request.
const ExtPtyCommand = "pty-command"

// PtyControl is a text message a server sends on a PTY WebSocket: before
// any output, Status "connected", or "error" with Error saying why the
// terminal cannot be reached (the server closes the connection after it);
// to a client that offered the subprotocol PtyExitControlSubprotocol,
// "exited" with the exit code just before the exit close. Every other
// server message is binary terminal output.
type PtyControl struct {
	Type       string `json:"type"` // always "control"
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	ExitReason string `json:"exitReason,omitempty"`
}

// PtyExit is carried, as JSON, by the reason of the close frame that ends
// a PTY WebSocket when the terminal's process exits: close code 1000 for
// exit code 0, 1011 for any other. ExitReason words a non-zero code
// ("non-zero exit", "Ctrl+C", "SIGKILL", "SIGTERM", "signal N").
type PtyExit struct {
	ExitCode   int    `json:"exitCode"`
	ExitReason string `json:"exitReason,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Values of PtyControl.Type and PtyControl.Status.
const (
	PtyControlType       = "control"
	PtyStatusConnected   = "connected"
	PtyStatusError       = "error"
	PtyStatusExited      = "exited"
	ptyExitReasonNonZero = "non-zero exit"
)

// NewPtyExit describes exit code code as servers send it.
func NewPtyExit(code int) PtyExit {
	e := PtyExit{ExitCode: code}
	switch {
	case code == 0:
	case code == 130:
		e.ExitReason = "Ctrl+C"
	case code == 137:
		e.ExitReason = "SIGKILL"
	case code == 143:
		e.ExitReason = "SIGTERM"
	case code > 128:
		e.ExitReason = fmt.Sprintf("signal %d", code-128)
	default:
		e.ExitReason = ptyExitReasonNonZero
	}
	return e
}

// ParsePtyExit reads the exit code from a PTY WebSocket's close reason; ok
// is false when reason carries none.
func ParsePtyExit(reason string) (e PtyExit, ok bool) {
	var raw struct {
		ExitCode   *int   `json:"exitCode"`
		ExitReason string `json:"exitReason"`
		Error      string `json:"error"`
	}
	if json.Unmarshal([]byte(reason), &raw) != nil || raw.ExitCode == nil {
		return PtyExit{}, false
	}
	return PtyExit{ExitCode: *raw.ExitCode, ExitReason: raw.ExitReason, Error: raw.Error}, true
}
