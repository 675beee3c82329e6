package toolbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/internal/errbody"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// PTY sessions: interactive terminals in the sandbox (docs/protocol.md,
// "PTY sessions").

// ErrPtyDisconnected is returned by Pty.Wait when the connection ended
// without the exit code (the link broke, or the server does not say).
var ErrPtyDisconnected = errors.New("toolbox: the PTY connection ended without an exit code")

// ptyPath is the path of PTY session id, plus suffix.
func ptyPath(id, suffix string) string { return "/process/pty/" + seg(id) + suffix }

// ptyJSON sends a request about PTY session id.
func (c *Client) ptyJSON(ctx context.Context, method, id, suffix string, in, out any) error {
	if err := checkID("PTY session ID", id); err != nil {
		return err
	}
	return c.doJSON(ctx, method, ptyPath(id, suffix), nil, in, nil, out)
}

// CreatePty creates a PTY session (POST /process/pty). An existing ID gives
// an *APIError with StatusCode 409. req.Command needs a server that offers
// ExtPtyCommand (an agentbox server): elsewhere CreatePty fails with an
// error matching errors.ErrUnsupported rather than start a shell.
func (c *Client) CreatePty(ctx context.Context, req PtyCreateRequest) error {
	if err := checkID("PTY session ID", req.ID); err != nil {
		return err
	}
	if req.Command != "" {
		ext, err := c.Extensions(ctx)
		if err != nil {
			return err
		}
		if !ext.PtyCommand {
			return fmt.Errorf("toolbox: the server cannot run a command in a PTY session (no %q extension); leave Command empty for a shell: %w", ExtPtyCommand, errors.ErrUnsupported)
		}
	}
	return c.doJSON(ctx, http.MethodPost, "/process/pty", nil, req, nil, nil)
}

// GetPty describes a PTY session.
func (c *Client) GetPty(ctx context.Context, id string) (*PtySessionInfo, error) {
	var info PtySessionInfo
	return &info, c.ptyJSON(ctx, http.MethodGet, id, "", nil, &info)
}

// ListPtys lists the PTY sessions.
func (c *Client) ListPtys(ctx context.Context) ([]PtySessionInfo, error) {
	var list PtyListResponse
	if err := c.doJSON(ctx, http.MethodGet, "/process/pty", nil, nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Sessions, nil
}

// ResizePty sets the size of a PTY session's terminal; its programs get
// SIGWINCH. A session that ended gives an *APIError with StatusCode 410.
func (c *Client) ResizePty(ctx context.Context, id string, cols, rows int) (*PtySessionInfo, error) {
	if cols < 1 || rows < 1 || cols > MaxPtySize || rows > MaxPtySize {
		return nil, fmt.Errorf("toolbox: terminal size %dx%d: cols and rows must be between 1 and %d: %w", cols, rows, MaxPtySize, sandbox.ErrInvalidArgument)
	}
	var info PtySessionInfo
	return &info, c.ptyJSON(ctx, http.MethodPost, id, "/resize", PtyResizeRequest{Cols: cols, Rows: rows}, &info)
}

// DeletePty deletes a PTY session, killing every process it started.
func (c *Client) DeletePty(ctx context.Context, id string) error {
	return c.ptyJSON(ctx, http.MethodDelete, id, "", nil, nil)
}

// OpenPty creates a PTY session that starts lazily, so that nothing it
// prints is missed, and connects to it. The session is deleted when the
// connection fails.
func (c *Client) OpenPty(ctx context.Context, req PtyCreateRequest) (*Pty, error) {
	req.LazyStart = true
	if err := c.CreatePty(ctx, req); err != nil {
		return nil, err
	}
	p, err := c.ConnectPty(ctx, req.ID)
	if err != nil {
		_ = c.DeletePty(context.WithoutCancel(ctx), req.ID)
		return nil, err
	}
	return p, nil
}

// ConnectPty connects to a PTY session's terminal over a WebSocket; a
// session that starts lazily starts now. Several connections to one
// session all see its output.
func (c *Client) ConnectPty(ctx context.Context, id string) (*Pty, error) {
	if err := checkID("PTY session ID", id); err != nil {
		return nil, err
	}
	path := ptyPath(id, "/connect")
	conn, resp, err := websocket.Dial(ctx, c.base+path, &websocket.DialOptions{
		HTTPClient:      c.hc,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
			return nil, c.newAPIError(req, resp)
		}
		return nil, fmt.Errorf("toolbox: connecting to PTY session %q: %w", id, err)
	}
	conn.SetReadLimit(wsReadLimit)
	typ, data, err := conn.Read(ctx)
	var ctl PtyControl
	if err == nil && (typ != websocket.MessageText || json.Unmarshal(data, &ctl) != nil || ctl.Type != PtyControlType) {
		err = fmt.Errorf("the server's first message is not a control message: %q", errbody.Cut(string(data), 200))
	}
	if err == nil && ctl.Status != PtyStatusConnected {
		err = fmt.Errorf("%s", ctl.Error)
	}
	if err != nil {
		_ = conn.CloseNow()
		return nil, fmt.Errorf("toolbox: connecting to PTY session %q: %w", id, err)
	}
	p := &Pty{c: c, id: id, conn: conn, done: make(chan struct{})}
	p.r, p.w = io.Pipe()
	ctx, p.stop = context.WithCancel(context.WithoutCancel(ctx))
	p.stopPings = keepAlive(ctx, conn)
	go p.receive(ctx)
	return p, nil
}

// Pty is a connection to a PTY session's terminal: Read returns the
// terminal's output (io.EOF once the session's process exited and all its
// output was read), Write types input (bytes as they are: "\x03" is
// Ctrl-C). Wait returns the exit code once the output was read to the end.
// Read, Write and the other methods may be called from different
// goroutines.
type Pty struct {
	c         *Client
	id        string
	conn      *websocket.Conn
	r         *io.PipeReader
	w         *io.PipeWriter
	stop      context.CancelFunc
	stopPings func()
	done      chan struct{} // closed when receive ended; then code and err are set
	code      int
	err       error
	closeOnce sync.Once
}

// ID returns the PTY session's ID.
func (p *Pty) ID() string { return p.id }

// receive copies the output into the pipe until the server closes.
func (p *Pty) receive(ctx context.Context) {
	defer func() {
		p.stopPings()
		p.stop()
		close(p.done)
	}()
	for {
		// Only the first message is a control message: later ones, text
		// or binary, are output, as Daytona's SDKs read them.
		_, rd, err := p.conn.Reader(ctx)
		if err != nil {
			p.code, p.err = ptyOutcome(err)
			p.w.Close()
			return
		}
		if _, err := io.Copy(p.w, rd); err != nil {
			// Closed by Close: nobody reads anymore.
			p.code, p.err = -1, fmt.Errorf("toolbox: PTY session %q: the connection was closed", p.id)
			return
		}
	}
}

// ptyOutcome reads the exit code from the error that ended the connection.
func ptyOutcome(err error) (int, error) {
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		return -1, fmt.Errorf("%w: %w", ErrPtyDisconnected, err)
	}
	if e, ok := ParsePtyExit(ce.Reason); ok {
		return e.ExitCode, nil
	}
	if ce.Code == websocket.StatusNormalClosure && ce.Reason == "" {
		return 0, nil // as Daytona's SDKs read a bare normal close
	}
	msg := ce.Reason
	if e := (PtyExit{}); json.Unmarshal([]byte(ce.Reason), &e) == nil && e.Error != "" {
		msg = e.Error
	}
	return -1, fmt.Errorf("%w: closed with %v %s", ErrPtyDisconnected, ce.Code, strings.TrimSpace(msg))
}

// Read reads the terminal's output.
func (p *Pty) Read(b []byte) (int, error) { return p.r.Read(b) }

// Write sends input to the terminal.
func (p *Pty) Write(b []byte) (int, error) {
	if err := p.conn.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		return 0, fmt.Errorf("toolbox: PTY session %q: sending input: %w", p.id, err)
	}
	return len(b), nil
}

// Resize sets the terminal's size.
func (p *Pty) Resize(ctx context.Context, cols, rows int) error {
	_, err := p.c.ResizePty(ctx, p.id, cols, rows)
	return err
}

// Kill deletes the PTY session, killing its processes; Wait then returns
// 137.
func (p *Pty) Kill(ctx context.Context) error { return p.c.DeletePty(ctx, p.id) }

// Wait waits until the session's process exited and its output was read
// (Read returned io.EOF), and returns its exit code (128+N after signal
// N). When the connection ended without the exit code it asks the server
// (agentbox servers keep it) and otherwise fails with an error matching
// ErrPtyDisconnected.
func (p *Pty) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	if p.err == nil || !errors.Is(p.err, ErrPtyDisconnected) {
		return p.code, p.err
	}
	if info, err := p.c.GetPty(ctx, p.id); err == nil && info.ExitCode != nil {
		return *info.ExitCode, nil
	}
	return -1, p.err
}

// Close disconnects, leaving the session and its processes running (see
// Kill). A Pty whose output was read to the end needs no Close.
func (p *Pty) Close() error {
	p.closeOnce.Do(func() {
		p.r.CloseWithError(fmt.Errorf("toolbox: PTY session %q: the connection was closed", p.id))
		_ = p.conn.Close(websocket.StatusNormalClosure, "")
		<-p.done
	})
	return nil
}
