package toolbox

import (
	"net/http"
	"strings"
	"time"
)

// The wire vocabulary of the toolbox protocol: Daytona's headers and log
// markers, and the agentbox extensions (docs/protocol.md). Client and
// server (package toolbox/daemon) both use these names; exit codes are
// those of package sandbox (sandbox.ExitKilled, sandbox.ExitTimedOut).

// Daytona's protocol headers.
const (
	// HeaderSDKVersion carries the client's SDK version; >= 0.167.0 selects
	// JSON logs with server-split stdout and stderr.
	HeaderSDKVersion = "X-Daytona-SDK-Version"
	// HeaderSource names the client.
	HeaderSource = "X-Daytona-Source"
	// HeaderSplitOutput, with value "true", asks old servers for raw logs
	// with markers.
	HeaderSplitOutput = "X-Daytona-Split-Output"
)

// SDKVersion is the Daytona SDK version this client announces.
const SDKVersion = "0.205.1"

// SourceName is the X-Daytona-Source this client announces.
const SourceName = "agentbox-go"

// Stream ids: the byte that names stdout or stderr in a frame of the frames
// extension, and, three times over, in the markers of Daytona's log.
const (
	StreamStdout byte = 1
	StreamStderr byte = 2
)

// Log stream markers: in Daytona's multiplexed log, each chunk starts with
// the marker of its stream, its stream id three times.
const (
	StdoutMarker = "\x01\x01\x01"
	StderrMarker = "\x02\x02\x02"
)

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
	// command's stdin afterwards, and HeaderStdinEncoding EncodingBase64
	// says data is base64 of raw bytes. Input to a command that no longer
	// reads it gets 410 GONE.
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
	// ExtBinary: a synchronous POST /process/session/{id}/exec is answered
	// with the raw output instead of JSON, so that output crosses the
	// connection once, binary safe, and each side can handle it in a
	// buffer of the exact size: status 200, Content-Type
	// ContentTypeBinary, the command id, exit code and byte counts in
	// headers (HeaderCommandID, HeaderExitCode, HeaderStdoutBytes,
	// HeaderStderrBytes, HeaderStdoutDropped, HeaderStderrDropped), and a
	// body of the stdout bytes followed by the stderr bytes. HeaderTail on
	// the request asks for only the last n bytes of each stream. Errors
	// stay JSON. Asynchronous execs are unchanged.
	ExtBinary = "binary"
	// ExtTether: on a session exec, the command is tied to its client and
	// dies with it, as a command run over ssh or by os/exec does. A sync
	// exec's command is killed when its request goes away before the
	// answer (the client closed the connection, or died); an async exec's
	// command is killed when, for TetherGrace, no log follower has been
	// connected and no request about the command (its logs, its exit
	// code, its input) has come. Without it (Daytona's way) a command runs
	// on whatever becomes of its client.
	ExtTether = "tether"
)

// TetherGrace is how long an agentbox toolbox server keeps a command run
// with ExtTether alive without any sign of its client.
const TetherGrace = 3 * time.Second

// Headers of the agentbox protocol extensions.
const (
	// HeaderExtensions is sent by agentbox servers on every response; its
	// value lists the agentbox protocol extensions they support, comma
	// separated. Plain Daytona servers do not send it.
	HeaderExtensions = "X-Agentbox-Extensions"
	// HeaderUseExtensions is sent by a client that wants the listed
	// extensions for this request.
	HeaderUseExtensions = "X-Agentbox-Use"
	// HeaderEncoding is the server's confirmation that stdout and stderr
	// of the answer are encoded; its only value is EncodingBase64.
	HeaderEncoding = "X-Agentbox-Encoding"
	// HeaderStdinClose, with value "true" on an input request using the
	// stdin extension, closes the command's stdin after writing data.
	HeaderStdinClose = "X-Agentbox-Stdin-Close"
	// HeaderStdinEncoding, with value EncodingBase64 on an input request
	// using the stdin extension, says that data is standard base64 of the
	// raw bytes to write (so input need not be UTF-8).
	HeaderStdinEncoding = "X-Agentbox-Stdin-Encoding"

	// HeaderTail, on a sync session exec using the binary extension, asks
	// for only the last n bytes (a decimal n > 0) of stdout and of stderr;
	// the rest is counted in HeaderStdoutDropped and HeaderStderrDropped.
	HeaderTail = "X-Agentbox-Tail"
	// HeaderCommandID, HeaderExitCode, HeaderStdoutBytes,
	// HeaderStderrBytes, HeaderStdoutDropped and HeaderStderrDropped
	// describe a binary exec answer (ExtBinary): the command's id, its exit
	// code, how many bytes of stdout and of stderr the body holds (in that
	// order), and how many were left out at the start of each stream
	// (HeaderTail). All counts are decimal.
	HeaderCommandID     = "X-Agentbox-Command-Id"
	HeaderExitCode      = "X-Agentbox-Exit-Code"
	HeaderStdoutBytes   = "X-Agentbox-Stdout-Bytes"
	HeaderStderrBytes   = "X-Agentbox-Stderr-Bytes"
	HeaderStdoutDropped = "X-Agentbox-Stdout-Dropped"
	HeaderStderrDropped = "X-Agentbox-Stderr-Dropped"
)

// ContentTypeBinary is the media type of a binary exec answer (ExtBinary).
const ContentTypeBinary = "application/octet-stream"

// EncodingBase64 is the value of HeaderEncoding and HeaderStdinEncoding:
// standard base64 (RFC 4648 with padding) of the raw bytes.
const EncodingBase64 = "base64"

// Close reasons of the frames extension.
const (
	// CloseReasonExitPrefix starts the close reason of a command that
	// ended: "exit=" followed by the decimal exit code.
	CloseReasonExitPrefix = "exit="
	// CloseReasonKilled is the close reason when the session was deleted
	// while following.
	CloseReasonKilled = "killed"
)

// Uses reports whether a request with header h asks for the agentbox
// extension ext (HeaderUseExtensions, comma separated, any case).
func Uses(h http.Header, ext string) bool {
	for _, v := range h.Values(HeaderUseExtensions) {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), ext) {
				return true
			}
		}
	}
	return false
}
