package toolbox

// Names of the agentbox protocol extensions, as listed in the
// X-Agentbox-Extensions and X-Agentbox-Use headers.
const (
	// ExtFrames: on the WebSocket handshake of a log follow, each binary
	// message is one stream id byte (StreamStdout or StreamStderr) and the
	// raw payload; the server closes with 1000 and reason "exit=<code>"
	// when the command ended, or "killed" when its session was deleted.
	ExtFrames = "frames"
	// ExtStdin: on POST …/command/{id}/input, data is written exactly as
	// given (no newline appended, no echo), HeaderStdinClose closes the
	// command's stdin afterwards, and HeaderStdinEncoding "base64" says
	// data is base64 of raw bytes. Input to a command that no longer reads
	// it gets 410 GONE.
	ExtStdin = "stdin"
	// ExtBase64: on a sync session exec and on GET …/logs (JSON), stdout
	// and stderr are standard base64 of the raw bytes; the server confirms
	// with HeaderEncoding.
	ExtBase64 = "base64"
	// ExtStateless: on a session exec, the command runs in a fresh shell
	// of the session's current state, and nothing it changes (working
	// directory, environment, shell variables) is kept for the session's
	// later commands. The server skips saving the shell state, which makes
	// the command cheaper. Clients that wrap every command in a subshell
	// anyway use it to drop their wrapper. The server also drops the
	// command's log once its output was delivered (the sync answer was
	// written, or a frames follow ended with a close the client answered:
	// FollowResult.Delivered); the command's exit code stays, and its log
	// reads as empty from then on.
	ExtStateless = "stateless"
)

// Headers of the agentbox protocol extensions (see also HeaderExtensions
// and HeaderUseExtensions).
const (
	// HeaderEncoding is the server's confirmation that stdout and stderr
	// of the answer are encoded; its only value is "base64".
	HeaderEncoding = "X-Agentbox-Encoding"
	// HeaderStdinClose, with value "true" on an input request using the
	// stdin extension, closes the command's stdin after writing data.
	HeaderStdinClose = "X-Agentbox-Stdin-Close"
	// HeaderStdinEncoding, with value "base64" on an input request using
	// the stdin extension, says that data is standard base64 of the raw
	// bytes to write (so input need not be UTF-8).
	HeaderStdinEncoding = "X-Agentbox-Stdin-Encoding"
)

// Stream ids of the frames extension.
const (
	StreamStdout byte = 1
	StreamStderr byte = 2
)

// Close reasons of the frames extension.
const (
	// CloseReasonExitPrefix starts the close reason of a command that
	// ended: "exit=" followed by the decimal exit code.
	CloseReasonExitPrefix = "exit="
	// CloseReasonKilled is the close reason when the session was deleted
	// while following.
	CloseReasonKilled = "killed"
)
