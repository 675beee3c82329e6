package toolbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// CreateSession creates a session, a long-lived shell that runs commands one
// at a time (POST /process/session). An existing ID gives an *APIError with
// StatusCode 409.
func (c *Client) CreateSession(ctx context.Context, sessionID string) error {
	if err := checkID("session ID", sessionID); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodPost, "/process/session", nil, CreateSessionRequest{SessionID: sessionID}, nil, nil)
}

// GetSession describes a session and its commands.
func (c *Client) GetSession(ctx context.Context, sessionID string) (*Session, error) {
	if err := checkID("session ID", sessionID); err != nil {
		return nil, err
	}
	var s Session
	if err := c.doJSON(ctx, http.MethodGet, "/process/session/"+seg(sessionID), nil, nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSessions lists the sessions.
func (c *Client) ListSessions(ctx context.Context) ([]Session, error) {
	var s []Session
	if err := c.doJSON(ctx, http.MethodGet, "/process/session", nil, nil, nil, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// DeleteSession deletes a session, killing its shell and every process
// started in it.
func (c *Client) DeleteSession(ctx context.Context, sessionID string) error {
	if err := checkID("session ID", sessionID); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, "/process/session/"+seg(sessionID), nil, nil, nil, nil)
}

// ExecResult is the outcome of SessionExecute. For a synchronous exec the
// output is split into Stdout and Stderr (raw with the binary extension;
// else binary safe with the base64 extension, else as split by the
// server, else demultiplexed from the marked log) and ExitCode is set; for
// an async exec only CmdID is set.
type ExecResult struct {
	CmdID    string
	ExitCode *int
	// Stdout and Stderr hold the output, any bytes. With
	// SessionExecOptions.Tail they hold at most the last Tail bytes of
	// each stream; StdoutDropped and StderrDropped count the bytes left
	// out before them.
	Stdout, Stderr               string
	StdoutDropped, StderrDropped int64
}

// SessionExecute runs req.Command in a session (POST
// /process/session/{id}/exec). With RunAsync (or Async) it returns as soon
// as the command started; follow it with FollowLogs and GetCommand.
func (c *Client) SessionExecute(ctx context.Context, sessionID string, req SessionExecuteRequest) (*ExecResult, error) {
	return c.SessionExecuteWith(ctx, sessionID, req, SessionExecOptions{})
}

// SessionExecOptions are the agentbox extensions a session exec may use.
type SessionExecOptions struct {
	// Stateless asks for the stateless extension: the command runs in the
	// session's current state but leaves nothing behind for later commands
	// (no cd, export or variable persists), which the server makes
	// cheaper. Only servers whose Extensions include Stateless honour it;
	// others ignore the request and run the command as usual, so check
	// Extensions first when the difference matters.
	Stateless bool
	// Tether asks for the tether extension: the command dies with this
	// client (see ExtTether); follow an async command at once, or ask
	// about it at least every TetherGrace. Servers without the extension
	// ignore it.
	Tether bool
	// Tail, when above 0, keeps only the last Tail bytes of each stream
	// of a synchronous exec in the result. A server with the binary
	// extension sends only those; from others the client cuts them.
	Tail int64
}

// SessionExecuteWith is SessionExecute with agentbox extension options.
//
// A synchronous exec asks for the binary extension (and base64, for
// servers without it): then the output crosses the connection once, raw,
// and each result string is allocated once at its exact size. Servers that
// do not know the extensions ignore the request and answer JSON.
func (c *Client) SessionExecuteWith(ctx context.Context, sessionID string, req SessionExecuteRequest, opts SessionExecOptions) (*ExecResult, error) {
	if err := checkID("session ID", sessionID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Command) == "" {
		return nil, fmt.Errorf("toolbox: session exec: command is empty: %w", sandbox.ErrInvalidArgument)
	}
	if opts.Tail < 0 {
		return nil, fmt.Errorf("toolbox: session exec: Tail must not be negative: %w", sandbox.ErrInvalidArgument)
	}
	async := req.RunAsync || req.Async
	var use []string
	hdr := http.Header{}
	if !async {
		// Ask for binary and base64 unless the server is known not to
		// offer them: servers that do not know the header ignore it, and
		// the answer says whether it was honoured.
		e, known := c.cachedExtensions()
		if !known || e.Binary {
			use = append(use, ExtBinary)
			if opts.Tail > 0 {
				hdr.Set(HeaderTail, strconv.FormatInt(opts.Tail, 10))
			}
		}
		if !known || e.Base64 {
			use = append(use, ExtBase64)
		}
	}
	if opts.Stateless {
		use = append(use, ExtStateless)
	}
	if opts.Tether {
		use = append(use, ExtTether)
	}
	if len(use) > 0 {
		hdr.Set(HeaderUseExtensions, strings.Join(use, ","))
	}
	path := "/process/session/" + seg(sessionID) + "/exec"
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("toolbox: POST %s: encoding request: %w", path, err)
	}
	hreq, err := c.request(ctx, http.MethodPost, path, nil, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		hreq.Header[k] = v
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json, "+ContentTypeBinary)
	resp, err := c.send(hreq)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	if isBinaryResult(resp) {
		res, err := readBinaryResult(resp)
		if err != nil {
			return nil, fmt.Errorf("toolbox: POST %s: reading the answer: %w", path, err)
		}
		return res, nil
	}
	var r SessionExecuteResponse
	if err := decodeJSON(resp, maxOutputBytes, &r); err != nil {
		return nil, fmt.Errorf("toolbox: POST %s: decoding %d answer: %w", path, resp.StatusCode, err)
	}
	res := &ExecResult{CmdID: r.CmdID, ExitCode: r.ExitCode}
	if async || resp.StatusCode == http.StatusAccepted {
		return res, nil
	}
	stdout, stderr, err := splitOutput(resp.Header, r.Output, r.Stdout, r.Stderr)
	if err != nil {
		return nil, fmt.Errorf("toolbox: POST %s: %w", path, err)
	}
	res.Stdout, res.StdoutDropped = tailString(stdout, opts.Tail)
	res.Stderr, res.StderrDropped = tailString(stderr, opts.Tail)
	return res, nil
}

// tailString returns the last tail bytes of b (all when tail <= 0) as a
// string, and the count of bytes left out.
func tailString(b []byte, tail int64) (string, int64) {
	var dropped int64
	if tail > 0 && int64(len(b)) > tail {
		dropped = int64(len(b)) - tail
		b = b[dropped:]
	}
	return string(b), dropped
}

// splitOutput picks stdout and stderr from an answer: base64 fields when
// the server confirmed the encoding, else server-split fields, else the
// demultiplexed output.
func splitOutput(h http.Header, output, stdout, stderr *string) ([]byte, []byte, error) {
	if base64Encoded(h) {
		o, err := decodeB64(stdout)
		if err != nil {
			return nil, nil, fmt.Errorf("decoding base64 stdout: %w", err)
		}
		e, err := decodeB64(stderr)
		if err != nil {
			return nil, nil, fmt.Errorf("decoding base64 stderr: %w", err)
		}
		return o, e, nil
	}
	if stdout != nil || stderr != nil {
		return strBytes(stdout), strBytes(stderr), nil
	}
	if output != nil {
		o, e := demuxBytes([]byte(*output))
		return o, e, nil
	}
	return nil, nil, nil
}

func decodeB64(s *string) ([]byte, error) {
	if s == nil || *s == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(*s)
}

func strBytes(s *string) []byte {
	if s == nil || *s == "" {
		return nil
	}
	return []byte(*s)
}

// GetCommand describes a session command; ExitCode is nil while it runs.
func (c *Client) GetCommand(ctx context.Context, sessionID, cmdID string) (*Command, error) {
	if err := checkID("session ID", sessionID); err != nil {
		return nil, err
	}
	if err := checkID("command ID", cmdID); err != nil {
		return nil, err
	}
	var cmd Command
	if err := c.doJSON(ctx, http.MethodGet, commandPath(sessionID, cmdID), nil, nil, nil, &cmd); err != nil {
		return nil, err
	}
	return &cmd, nil
}

func commandPath(sessionID, cmdID string) string {
	return "/process/session/" + seg(sessionID) + "/command/" + seg(cmdID)
}

// SendInput writes data to the standard input of a running async command.
//
// With the server's stdin extension the bytes are written exactly, and
// may be any bytes (they travel base64-encoded, see HeaderStdinEncoding).
// Against a plain Daytona server, Daytona's semantics apply: a newline is
// appended when data does not end in one, and the input is echoed into the
// log unless the command ran with SuppressInputEcho; input travels as a
// JSON string there, so data must be valid UTF-8 (split input on rune
// boundaries). A command that already ended gives an error matching
// sandbox.ErrExited.
func (c *Client) SendInput(ctx context.Context, sessionID, cmdID string, data []byte) error {
	return c.input(ctx, sessionID, cmdID, data, false)
}

// CloseInput closes the standard input of a running async command, so it
// sees end of file. It needs the server's stdin extension; without it the
// error matches sandbox.ErrUnsupported.
func (c *Client) CloseInput(ctx context.Context, sessionID, cmdID string) error {
	return c.input(ctx, sessionID, cmdID, nil, true)
}

func (c *Client) input(ctx context.Context, sessionID, cmdID string, data []byte, closeIn bool) error {
	if err := checkID("session ID", sessionID); err != nil {
		return err
	}
	if err := checkID("command ID", cmdID); err != nil {
		return err
	}
	ext, err := c.Extensions(ctx)
	if err != nil {
		return err
	}
	var hdr http.Header
	payload := ""
	if ext.Stdin {
		// Exact bytes, base64 so that any byte travels in the JSON string.
		hdr = useExtensions(ExtStdin)
		if len(data) > 0 {
			hdr.Set(HeaderStdinEncoding, EncodingBase64)
			payload = base64.StdEncoding.EncodeToString(data)
		}
		if closeIn {
			hdr.Set(HeaderStdinClose, "true")
		}
	} else {
		if closeIn {
			return fmt.Errorf("toolbox: closing a command's stdin needs the agentbox stdin extension, which this server does not offer: %w", sandbox.ErrUnsupported)
		}
		if !utf8.Valid(data) {
			return fmt.Errorf("toolbox: send input: data is not valid UTF-8, and this server (without the agentbox stdin extension) takes input only as a JSON string; split input on rune boundaries: %w", sandbox.ErrInvalidArgument)
		}
		payload = string(data)
	}
	return retryInputPipe(ctx, func() error {
		return c.doJSON(ctx, http.MethodPost, commandPath(sessionID, cmdID)+"/input", nil, SessionSendInputRequest{Data: payload}, hdr, nil)
	})
}

// CommandLogs returns a snapshot of a command's output so far, split into
// stdout and stderr (binary safe with the base64 extension). The answer is
// bounded by MaxOutputBytes (an error matching ErrTooLarge past it):
// stream a longer log with FollowLogs.
func (c *Client) CommandLogs(ctx context.Context, sessionID, cmdID string) (stdout, stderr []byte, err error) {
	if err := checkID("session ID", sessionID); err != nil {
		return nil, nil, err
	}
	if err := checkID("command ID", cmdID); err != nil {
		return nil, nil, err
	}
	var hdr http.Header
	if e, known := c.cachedExtensions(); !known || e.Base64 {
		hdr = useExtensions(ExtBase64)
	}
	l, err := c.logs(ctx, sessionID, cmdID, hdr)
	if err != nil {
		return nil, nil, err
	}
	stdout, stderr, err = splitOutput(l.header, l.output, l.stdout, l.stderr)
	if err != nil {
		return nil, nil, fmt.Errorf("toolbox: GET %s/logs: %w", commandPath(sessionID, cmdID), err)
	}
	return stdout, stderr, nil
}

type logsAnswer struct {
	header                 http.Header
	output, stdout, stderr *string
}

// logs fetches GET …/logs: JSON for current SDK versions, raw text (with
// or without markers) for old servers.
func (c *Client) logs(ctx context.Context, sessionID, cmdID string, hdr http.Header) (*logsAnswer, error) {
	path := commandPath(sessionID, cmdID) + "/logs"
	req, err := c.request(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.5")
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	body, err := readAnswer(resp, maxOutputBytes, "the log (follow it with FollowLogs instead)")
	if err != nil {
		return nil, fmt.Errorf("toolbox: GET %s: reading answer: %w", path, err)
	}
	a := &logsAnswer{header: resp.Header}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" {
		var r struct {
			Output *string `json:"output"`
			Stdout *string `json:"stdout"`
			Stderr *string `json:"stderr"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, fmt.Errorf("toolbox: GET %s: decoding answer: %w", path, err)
		}
		a.output, a.stdout, a.stderr = r.Output, r.Stdout, r.Stderr
		return a, nil
	}
	s := string(body)
	a.output = &s
	return a, nil
}
