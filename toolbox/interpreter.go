package toolbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The interpreter: stateful Python contexts whose variables, imports and
// functions last between executions.

// CreateContextRequest is the body of POST /process/interpreter/context.
type CreateContextRequest struct {
	// Cwd is the context's working directory; default the work dir.
	Cwd string `json:"cwd,omitempty"`
	// Language is "python" (the default and the only one).
	Language string `json:"language,omitempty"`
}

// InterpreterContext describes an interpreter context.
type InterpreterContext struct {
	ID        string `json:"id"`
	Cwd       string `json:"cwd"`
	Language  string `json:"language"`
	CreatedAt string `json:"createdAt"`
	// Active reports whether the context's interpreter process is running.
	Active bool `json:"active"`
}

// ListContextsResponse is the answer of GET /process/interpreter/context.
type ListContextsResponse struct {
	Contexts []InterpreterContext `json:"contexts"`
}

// InterpreterExecuteRequest is the first message of the WebSocket of
// GET /process/interpreter/execute.
type InterpreterExecuteRequest struct {
	Code string `json:"code"`
	// ContextID names the context; empty means the default context.
	ContextID string `json:"contextId,omitempty"`
	// Envs are set in the interpreter's environment while the code runs.
	Envs map[string]string `json:"envs,omitempty"`
	// Timeout in seconds: nil means the server's default (10 minutes), 0
	// none. Code that outlives it is interrupted (KeyboardInterrupt); the
	// context keeps its state.
	Timeout *int `json:"timeout,omitempty"`
}

// Message types of the interpreter's WebSocket (InterpreterMessage.Type).
const (
	InterpreterStdout  = "stdout"
	InterpreterStderr  = "stderr"
	InterpreterResult  = "result"
	InterpreterError   = "error"
	InterpreterControl = "control"
)

// Texts of control messages: the execution ended, or was interrupted
// because it timed out.
const (
	ControlCompleted   = "completed"
	ControlInterrupted = "interrupted"
)

// WebSocket close codes of the interpreter: 4000 + the HTTP status less
// 400, as Daytona's 4008 for a timeout.
const (
	CloseInterpreterBadRequest websocket.StatusCode = 4000
	CloseInterpreterNotFound   websocket.StatusCode = 4004
	CloseInterpreterTimeout    websocket.StatusCode = 4008
)

// InterpreterMessage is one message the server sends while code runs:
// output (Text of stdout or stderr, as the code wrote it), the value of a
// final expression (result: Text is its repr), an uncaught exception
// (error: Name, Value, Traceback) or the end (control: Text).
type InterpreterMessage struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	Traceback string `json:"traceback,omitempty"`
}

// ExecutionError is an exception the code raised and did not catch.
type ExecutionError struct {
	Name      string
	Value     string
	Traceback string
}

// ExecutionResult is what RunCode gathered.
type ExecutionResult struct {
	Stdout string
	Stderr string
	// Result is the repr of the value of the code's final expression, if
	// it was not None.
	Result string
	// Error is the uncaught exception, or nil.
	Error *ExecutionError
}

// ErrExecutionTimeout is returned (wrapped) by RunCode when the code
// outlived its timeout and was interrupted; the context kept its state.
var ErrExecutionTimeout = errors.New("toolbox: interpreter execution timed out and was interrupted")

// CreateContext creates an interpreter context.
func (c *Client) CreateContext(ctx context.Context, req CreateContextRequest) (*InterpreterContext, error) {
	var ic InterpreterContext
	if err := c.doJSON(ctx, http.MethodPost, "/process/interpreter/context", nil, req, nil, &ic); err != nil {
		return nil, err
	}
	return &ic, nil
}

// ListContexts lists the contexts that were created (not the default one).
func (c *Client) ListContexts(ctx context.Context) ([]InterpreterContext, error) {
	var r ListContextsResponse
	if err := c.doJSON(ctx, http.MethodGet, "/process/interpreter/context", nil, nil, nil, &r); err != nil {
		return nil, err
	}
	return r.Contexts, nil
}

// DeleteContext deletes a context and ends its interpreter. An unknown id
// gives an *APIError with StatusCode 404.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	if err := checkID("context id", id); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, "/process/interpreter/context/"+seg(id), nil, nil, nil, nil)
}

// RunCode runs code in an interpreter context over the WebSocket of
// GET /process/interpreter/execute. Each message is passed to onMessage
// (when not nil) as it arrives, and gathered in the result. An unknown
// context gives an *APIError with StatusCode 404 (the server is asked
// before the upgrade); a timeout, an error matching ErrExecutionTimeout
// with what was gathered until the interruption. The stdout and stderr
// gathered are bounded by MaxOutputBytes together (one message too):
// past it RunCode returns what it gathered with an error matching
// ErrTooLarge.
func (c *Client) RunCode(ctx context.Context, req InterpreterExecuteRequest, onMessage func(InterpreterMessage)) (*ExecutionResult, error) {
	if strings.TrimSpace(req.Code) == "" {
		return nil, fmt.Errorf("toolbox: run code: code is empty: %w", sandbox.ErrInvalidArgument)
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		return nil, fmt.Errorf("toolbox: run code: timeout must not be negative: %w", sandbox.ErrInvalidArgument)
	}
	const path = "/process/interpreter/execute"
	u := c.base + path
	if req.ContextID != "" {
		u += "?" + url.Values{"contextId": {req.ContextID}}.Encode()
	}
	select {
	case <-c.closed:
		return nil, fmt.Errorf("toolbox: GET %s: client is closed", path)
	default:
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			return nil, c.newAPIError(req, resp)
		}
		return nil, fmt.Errorf("toolbox: GET %s: %w", path, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxOutputBytes)
	first, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("toolbox: run code: encoding request: %w", err)
	}
	if err := conn.Write(ctx, websocket.MessageText, first); err != nil {
		return nil, fmt.Errorf("toolbox: run code: sending the code: %w", err)
	}
	var res ExecutionResult
	var stdout, stderr strings.Builder
	interrupted := false
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			res.Stdout, res.Stderr = stdout.String(), stderr.String()
			var ce websocket.CloseError
			switch {
			case ctx.Err() != nil:
				return &res, fmt.Errorf("toolbox: run code: %w", ctx.Err())
			case errors.As(err, &ce) && ce.Code == CloseInterpreterTimeout:
				return &res, fmt.Errorf("%w: %s", ErrExecutionTimeout, ce.Reason)
			case errors.As(err, &ce) && (ce.Code == websocket.StatusNormalClosure || ce.Code == websocket.StatusGoingAway):
				if interrupted {
					return &res, ErrExecutionTimeout
				}
				return &res, nil
			case errors.As(err, &ce):
				return &res, fmt.Errorf("toolbox: run code: the server closed with %d: %s", ce.Code, ce.Reason)
			}
			return &res, fmt.Errorf("toolbox: run code: %w", err)
		}
		var m InterpreterMessage
		if json.Unmarshal(data, &m) != nil {
			continue // as Daytona's SDKs, skip what is not a message
		}
		if (m.Type == InterpreterStdout || m.Type == InterpreterStderr) && int64(stdout.Len()+stderr.Len()+len(m.Text)) > maxOutputBytes {
			res.Stdout, res.Stderr = stdout.String(), stderr.String()
			return &res, fmt.Errorf("toolbox: run code: %w", tooLarge("the output", maxOutputBytes))
		}
		switch m.Type {
		case InterpreterStdout:
			stdout.WriteString(m.Text)
		case InterpreterStderr:
			stderr.WriteString(m.Text)
		case InterpreterResult:
			res.Result = m.Text
		case InterpreterError:
			res.Error = &ExecutionError{Name: m.Name, Value: m.Value, Traceback: m.Traceback}
		case InterpreterControl:
			interrupted = m.Text == ControlInterrupted
		}
		if onMessage != nil {
			onMessage(m)
		}
	}
}
