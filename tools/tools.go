package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/workspace"
)

// Defaults of Config.
const (
	DefaultMaxOutputBytes   = 16 << 10
	DefaultMaxRetainedBytes = 8 << 20
	DefaultStoredOutputs    = 16
	DefaultProgressInterval = time.Second
	DefaultMaxProcessOutput = 1 << 20
	DefaultReadFileLines    = 2000
	// DefaultMaxReadFileBytes is Config.MaxReadFileBytes' default (64 MiB).
	DefaultMaxReadFileBytes = 64 << 20
	// DefaultMaxEditFileBytes is Config.MaxEditFileBytes' default (16 MiB).
	DefaultMaxEditFileBytes = 16 << 20
	maxWaitSeconds          = 60
	maxListEntries          = 1000
	maxFindMatches          = 500
)

// Config configures a Set. The zero value of every field but Workspace
// means its default.
type Config struct {
	// Workspace is where the tools work. Required.
	Workspace *workspace.Workspace
	// Approve, when set, is asked before every command and every change to
	// a file; its error refuses the action (see [ApproveFunc]).
	Approve ApproveFunc
	// MaxOutputBytes bounds the text of a result handed to a model, per
	// stream of a command: longer output keeps a head and a tail around a
	// marker with the byte counts and a handle to read it all
	// (DefaultMaxOutputBytes).
	MaxOutputBytes int
	// MaxRetainedBytes bounds, per stream, the output of a foreground
	// command kept for read_output (DefaultMaxRetainedBytes); the oldest
	// bytes are dropped first.
	MaxRetainedBytes int64
	// StoredOutputs is how many truncated outputs stay retrievable by
	// handle, the oldest forgotten first (DefaultStoredOutputs).
	StoredOutputs int
	// MaxProcessOutput bounds the output of each background process kept
	// for process_output, the oldest dropped first
	// (DefaultMaxProcessOutput).
	MaxProcessOutput int
	// ProgressInterval is how often a running command reports progress
	// (DefaultProgressInterval).
	ProgressInterval time.Duration
	// MaxReadFileBytes bounds how much of a file read_file reads, from its
	// start, to find the lines asked for and count the file's lines
	// (DefaultMaxReadFileBytes). Past it read_file stops: it says that the
	// file is larger and that its line count is a lower bound
	// (ReadFileOutput.Partial), and lines beyond are read with
	// execute_command. read_file holds at most MaxOutputBytes of content
	// whatever the file's size.
	MaxReadFileBytes int64
	// MaxEditFileBytes bounds the size of a file edit_file changes, which
	// it holds in memory with its new content (DefaultMaxEditFileBytes). A
	// larger file is refused from its size, before it is read, with a
	// tool error naming the size and the limit (matching
	// sandbox.ErrInvalidArgument and workspace.ErrTooLarge).
	MaxEditFileBytes int64
}

// Set is the tools of one workspace. It keeps the outputs retrievable by
// handle and follows the background processes it started or was asked
// about; Close releases them. It is safe for concurrent use.
type Set struct {
	cfg   Config
	ws    *workspace.Workspace
	tools []*Tool

	outputs outputStore

	ctx    context.Context // ends with Close: process followers
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	procs  map[string]*procOutput
	closed bool
}

// New returns the tools of cfg.Workspace.
func New(cfg Config) (*Set, error) {
	if cfg.Workspace == nil {
		return nil, fmt.Errorf("tools: Config.Workspace is nil: %w", sandbox.ErrInvalidArgument)
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.MaxRetainedBytes <= 0 {
		cfg.MaxRetainedBytes = DefaultMaxRetainedBytes
	}
	if cfg.StoredOutputs <= 0 {
		cfg.StoredOutputs = DefaultStoredOutputs
	}
	if cfg.MaxProcessOutput <= 0 {
		cfg.MaxProcessOutput = DefaultMaxProcessOutput
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.MaxReadFileBytes <= 0 {
		cfg.MaxReadFileBytes = DefaultMaxReadFileBytes
	}
	if cfg.MaxEditFileBytes <= 0 {
		cfg.MaxEditFileBytes = DefaultMaxEditFileBytes
	}
	s := &Set{cfg: cfg, ws: cfg.Workspace, procs: map[string]*procOutput{}}
	s.outputs.max = cfg.StoredOutputs
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, d := range s.definitions() {
		t, err := d.tool(s)
		if err != nil {
			return nil, err
		}
		s.tools = append(s.tools, t)
	}
	return s, nil
}

// Close stops following background processes (they keep running in the
// sandbox) and forgets the stored outputs.
func (s *Set) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Workspace returns the set's workspace.
func (s *Set) Workspace() *workspace.Workspace { return s.ws }

// Tools returns the tools, in a fixed order.
func (s *Set) Tools() []*Tool { return append([]*Tool(nil), s.tools...) }

// Tool returns the tool named name, or nil.
func (s *Set) Tool(name string) *Tool {
	for _, t := range s.tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Call runs the tool named name with the JSON arguments args; an unknown
// name is a tool error.
func (s *Set) Call(ctx context.Context, name string, args json.RawMessage, opts *CallOptions) *Result {
	t := s.Tool(name)
	if t == nil {
		names := make([]string, len(s.tools))
		for i, t := range s.tools {
			names[i] = t.Name
		}
		return errorResult(fmt.Errorf("there is no tool %q; the tools are %s: %w", name, strings.Join(names, ", "), sandbox.ErrInvalidArgument))
	}
	return t.Call(ctx, args, opts)
}

// CallOptions configures one tool call. The zero value is valid.
type CallOptions struct {
	// Progress, when set, receives the progress of a long command while it
	// runs, every Config.ProgressInterval. It is called from one goroutine
	// at a time.
	Progress func(Progress)
	// Approve, when set, is asked after Config.Approve (see ApproveFunc).
	Approve ApproveFunc
}

func (o *CallOptions) approve() ApproveFunc {
	if o == nil {
		return nil
	}
	return o.Approve
}

func (o *CallOptions) progress() func(Progress) {
	if o == nil {
		return nil
	}
	return o.Progress
}

// Progress is the progress of a running command.
type Progress struct {
	// Elapsed is how long the command has run.
	Elapsed time.Duration
	// Bytes counts the bytes it has written to stdout and stderr.
	Bytes int64
	// LastLine is the last complete line of output, if any.
	LastLine string
}

// Result is the outcome of a tool call.
type Result struct {
	// Text is what the model reads.
	Text string
	// Data is the typed output (e.g. *ExecuteOutput); nil on error.
	Data any
	// Err is non-nil when the call failed: Text then says why. It matches
	// ErrRefused for a refusal and sandbox.ErrInvalidArgument for a bad
	// input.
	Err error
}

// IsError reports whether the call failed.
func (r *Result) IsError() bool { return r.Err != nil }

func errorResult(err error) *Result {
	return &Result{Text: "Error: " + err.Error(), Err: err}
}

// Tool is one tool of a Set.
type Tool struct {
	// Name is the tool's name, e.g. "execute_command".
	Name string
	// Title is a short human name.
	Title string
	// InputSchema is the JSON schema (2020-12) of the tool's arguments,
	// an object.
	InputSchema json.RawMessage
	// ReadOnly reports a tool that changes nothing; Destructive one that
	// may delete or overwrite.
	ReadOnly, Destructive bool

	desc     string
	ws       *workspace.Workspace
	resolved *jsonschema.Resolved
	run      func(ctx context.Context, args json.RawMessage, o *CallOptions) (text string, data any, err error)
}

// Description describes the tool to a model, with the workspace's
// instructions.
func (t *Tool) Description() string {
	if in := t.ws.Instructions(); in != "" {
		return t.desc + "\n\n" + in
	}
	return t.desc
}

// Call validates args against the tool's schema and runs the tool.
func (t *Tool) Call(ctx context.Context, args json.RawMessage, opts *CallOptions) *Result {
	if err := t.validate(args); err != nil {
		return errorResult(err)
	}
	text, data, err := t.run(ctx, args, opts)
	if err != nil {
		r := errorResult(err)
		if text != "" {
			r.Text = text + "\n\n" + r.Text
		}
		return r
	}
	return &Result{Text: text, Data: data}
}

func (t *Tool) validate(args json.RawMessage) error {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return fmt.Errorf("the arguments of %s are not JSON: %v: %w", t.Name, err, sandbox.ErrInvalidArgument)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("the arguments of %s must be a JSON object: %w", t.Name, sandbox.ErrInvalidArgument)
	}
	if err := t.resolved.Validate(v); err != nil {
		return fmt.Errorf("invalid arguments for %s: %v (schema: %s): %w", t.Name, err, t.InputSchema, sandbox.ErrInvalidArgument)
	}
	return nil
}

// definition is how a tool is made.
type definition struct {
	name, title, desc     string
	schema                string
	readOnly, destructive bool
	run                   func(ctx context.Context, args json.RawMessage, o *CallOptions) (string, any, error)
}

func (d definition) tool(s *Set) (*Tool, error) {
	var sch jsonschema.Schema
	if err := json.Unmarshal([]byte(d.schema), &sch); err != nil {
		return nil, fmt.Errorf("tools: the schema of %s: %w", d.name, err)
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tools: the schema of %s: %w", d.name, err)
	}
	return &Tool{Name: d.name, Title: d.title, InputSchema: json.RawMessage(d.schema), ReadOnly: d.readOnly, Destructive: d.destructive, desc: d.desc, ws: s.ws, resolved: rs, run: d.run}, nil
}

// typed adapts a typed handler and its renderer to a definition's run.
func typed[In any, Out any](h func(context.Context, In, *CallOptions) (Out, error), render func(Out) string) func(context.Context, json.RawMessage, *CallOptions) (string, any, error) {
	return func(ctx context.Context, args json.RawMessage, o *CallOptions) (string, any, error) {
		var in In
		if len(args) > 0 && string(args) != "null" {
			dec := json.NewDecoder(strings.NewReader(string(args)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return "", nil, fmt.Errorf("invalid arguments: %v: %w", err, sandbox.ErrInvalidArgument)
			}
		}
		out, err := h(ctx, in, o)
		if err != nil {
			return "", nil, err
		}
		return render(out), out, nil
	}
}

// invalid returns an invalid-argument error.
func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sandbox.ErrInvalidArgument)...)
}

var errClosed = errors.New("tools: the set is closed")
