package cli

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/internal/utf8cut"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// jsonHelp documents what --json prints; it is the text of 'agentbox help
// json'.
const jsonHelp = `With --json, agentbox prints machine-readable JSON on standard output.

exec, and logs -f, print a stream of JSON lines (one object per line),
written as the command runs, in this order:

  {"type":"start","sandbox":"default","command":"echo hi"}
  {"type":"stdout","data":"hi\n","encoding":"utf-8"}
  {"type":"stderr","data":"/wA=","encoding":"base64"}
  {"type":"exit","exitCode":0,"timedOut":false,"killed":false,"durationMs":12.5}

"start" comes once the sandbox runs ("process" names the process for
logs -f). Each "stdout" and "stderr" event carries a chunk of output, in
order, exactly: "encoding" is "utf-8" when the chunk is valid UTF-8 (then
"data" is that text) and "base64" otherwise (a character is never split
between two chunks). The last event is "exit" (the command's end: its exit
code, whether the timeout or a kill ended it, how long it ran) or "error".
Output is never held back: memory stays small whatever the command prints.

Every other command prints one JSON document (an object or an array).

Errors are JSON objects, on standard error, or as the last event of the
stream of exec and logs -f:

  {"type":"error","code":"not_found","message":"no sandbox \"x\" (see 'agentbox sandbox ls')","exitCode":1}

"code" is one of (exit code in brackets):

  usage            a bad command line (2)
  config_conflict  an option the existing sandbox was not created with (2)
  not_found        no such sandbox, process or image (1)
  in_use           the image is used by a sandbox or a snapshot (1)
  exists           the name is taken (a secret's) (1)
  state_dir        the state dir is not writable, not private, or unknown (1; exec: 125)
  start_failed     the sandbox could not start (1; exec: 125)
  sandbox_gone     the sandbox was stopped or removed while the command ran (137)
  output           writing the command's output failed (125)
  interrupted      SIGINT or SIGTERM stopped agentbox (130 or 143)
  internal         anything else (1; exec: 125)

A command that timed out is not an error: its "exit" event says
"timedOut":true, with exit code 124.`

// writeJSONLine prints v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// startEvent opens a stream.
type startEvent struct {
	Type    string `json:"type"` // "start"
	Sandbox string `json:"sandbox"`
	Process int    `json:"process,omitempty"` // logs -f: the process's ID
	Command string `json:"command,omitempty"`
}

// chunkEvent is output of the command.
type chunkEvent struct {
	Type     string `json:"type"` // "stdout" or "stderr"
	Data     string `json:"data"`
	Encoding string `json:"encoding"` // "utf-8" or "base64"
}

// exitEvent ends a stream: the command's result.
type exitEvent struct {
	Type       string  `json:"type"` // "exit"
	ExitCode   int     `json:"exitCode"`
	TimedOut   bool    `json:"timedOut"`
	Killed     bool    `json:"killed"`
	DurationMs float64 `json:"durationMs"`
}

// eventStream writes the JSON lines of exec and logs -f. Its methods are
// safe for concurrent use: stdout and stderr are written from different
// goroutines.
type eventStream struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first write error; nothing is written after it
}

func newEventStream(w io.Writer) *eventStream { return &eventStream{w: w} }

func (s *eventStream) emit(v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = writeJSONLine(s.w, v)
	}
	return s.err
}

func (s *eventStream) start(e startEvent) error {
	e.Type = "start"
	return s.emit(e)
}

func (s *eventStream) exit(res *sandbox.CommandResult) error {
	return s.emit(exitEvent{Type: "exit", ExitCode: res.ExitCode, TimedOut: res.TimedOut, Killed: res.Killed,
		DurationMs: float64(res.Duration.Round(time.Microsecond).Microseconds()) / 1000})
}

// output returns the writer of the events of one stream, "stdout" or
// "stderr". Close it to flush a trailing partial character.
func (s *eventStream) output(name string) *chunkWriter {
	return &chunkWriter{s: s, name: name}
}

// chunkWriter turns the writes of one output stream into chunk events. It
// holds back the bytes of a UTF-8 character cut by the end of a write (3
// at most) so that text stays text.
type chunkWriter struct {
	s       *eventStream
	name    string
	pending []byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	buf := p
	if len(c.pending) > 0 {
		buf = append(c.pending, p...)
		c.pending = nil
	}
	cut := utf8cut.Complete(buf)
	if cut < len(buf) {
		c.pending = append([]byte(nil), buf[cut:]...)
	}
	if cut == 0 {
		return len(p), nil
	}
	if err := c.s.emit(chunk(c.name, buf[:cut])); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes what was held back.
func (c *chunkWriter) Close() error {
	if len(c.pending) == 0 {
		return nil
	}
	p := c.pending
	c.pending = nil
	return c.s.emit(chunk(c.name, p))
}

// chunk returns the event of p, as text when it is valid UTF-8.
func chunk(name string, p []byte) chunkEvent {
	if utf8.Valid(p) {
		return chunkEvent{Type: name, Data: string(p), Encoding: "utf-8"}
	}
	return chunkEvent{Type: name, Data: base64.StdEncoding.EncodeToString(p), Encoding: "base64"}
}
