package daemon

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// The WebSocket of a PTY session (GET /process/pty/{sessionId}/connect),
// as Daytona's SDKs expect it: a text message {"type":"control","status":
// "connected"} first, then the terminal's output in binary messages; every
// message from the client (text or binary) is input; when the process
// exits the server closes with 1000 (exit code 0) or 1011 and the exit
// code in the close reason (toolbox.PtyExit).

const (
	// ptyClientQueue is how many output messages wait for a client.
	ptyClientQueue = 64
	// ptyStall is how long output waits for a client that does not read
	// before the client is dropped (closed with 1008).
	ptyStall = 30 * time.Second
	// ptyInputLimit bounds one input message.
	ptyInputLimit = 1 << 20
)

// ptyClient is one WebSocket connected to a PTY session.
type ptyClient struct {
	out      chan []byte   // output; closed by the session when it ends
	gone     chan struct{} // closed when the client left
	drop     chan struct{} // closed when the session drops the client
	dropOnce sync.Once
}

// attach starts the session's process if it starts lazily and connects a
// new client to its output. It fails when the session ended (code is its
// exit code) or its process cannot start.
func (ps *ptySession) attach() (c *ptyClient, code *int, err error) {
	if err := ps.start(); err != nil {
		return nil, nil, fmt.Errorf("failed to start the PTY session's shell: %w", err)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.info.ExitCode != nil {
		code := *ps.info.ExitCode
		return nil, &code, fmt.Errorf("PTY session %q has ended with exit code %d", ps.info.ID, code)
	}
	c = &ptyClient{out: make(chan []byte, ptyClientQueue), gone: make(chan struct{}), drop: make(chan struct{})}
	ps.clients[c] = struct{}{}
	close(ps.wake)
	ps.wake = make(chan struct{})
	return c, nil, nil
}

// detach disconnects a client.
func (ps *ptySession) detach(c *ptyClient) {
	ps.mu.Lock()
	delete(ps.clients, c)
	ps.mu.Unlock()
	close(c.gone)
}

// pump reads the terminal's output and hands it to the clients, waiting
// for one when none is connected, until the terminal is closed or hung up.
func (ps *ptySession) pump(master interface{ Read([]byte) (int, error) }) {
	defer close(ps.pumped)
	buf := make([]byte, ptyReadChunk)
	for {
		ps.awaitClient()
		n, err := master.Read(buf)
		if n > 0 {
			ps.deliver(slices.Clone(buf[:n]))
		}
		if err != nil {
			return
		}
	}
}

// awaitClient returns once a client is connected, or the process exited
// (its last output is read then even with nobody to see it).
func (ps *ptySession) awaitClient() {
	for {
		ps.mu.Lock()
		n, wake := len(ps.clients), ps.wake
		ps.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-wake:
		case <-ps.exited:
			return
		}
	}
}

// deliver hands b to every connected client, waiting for one to connect
// when none is (and the process runs). A client that leaves b waiting for
// ptyStall is dropped; a deleted session drops b.
func (ps *ptySession) deliver(b []byte) {
	for {
		ps.mu.Lock()
		clients := make([]*ptyClient, 0, len(ps.clients))
		for c := range ps.clients {
			clients = append(clients, c)
		}
		ps.mu.Unlock()
		sent := false
		for _, c := range clients {
			sent = ps.send(c, b) || sent
		}
		if sent {
			return
		}
		select {
		case <-ps.exited:
			return
		default:
		}
		ps.awaitClient()
	}
}

// send hands b to c and reports whether c took it.
func (ps *ptySession) send(c *ptyClient, b []byte) bool {
	select {
	case c.out <- b:
		return true
	default:
	}
	t := time.NewTimer(ptyStall)
	defer t.Stop()
	select {
	case c.out <- b:
		return true
	case <-c.gone:
	case <-ps.dead:
	case <-t.C:
		ps.mu.Lock()
		delete(ps.clients, c)
		ps.mu.Unlock()
		c.dropOnce.Do(func() { close(c.drop) })
	}
	return false
}

// input writes data to the terminal.
func (ps *ptySession) input(data []byte) {
	ps.mu.Lock()
	master := ps.master
	ps.mu.Unlock()
	if master != nil {
		_, _ = master.Write(data) // fails only once the terminal is closed
	}
}

func (s *Server) handlePtyConnect(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.pty(r.PathValue("sessionId"))
	if err != nil {
		return err
	}
	s.servePty(w, r, ps)
	return nil
}

// handlePtyCreateConnect serves GET /process/pty/create-connect?id=&cwd=
// &cols=&rows=, which newer Daytona SDKs use: create a session and connect
// to it in one request, its environment in an X-Daytona-Pty-Envs~
// subprotocol. The shell starts with the connection.
func (s *Server) handlePtyCreateConnect(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := toolbox.PtyCreateRequest{ID: q.Get("id"), Cwd: q.Get("cwd"), LazyStart: true}
	for name, v := range map[string]*int{"cols": &req.Cols, "rows": &req.Rows} {
		if t := q.Get(name); t != "" {
			n, err := strconv.Atoi(t)
			if err != nil {
				return badRequest("invalid %s %q: give a number between 1 and %d", name, t, toolbox.MaxPtySize)
			}
			*v = n
		}
	}
	envs, err := ptyEnvsSubprotocol(r)
	if err != nil {
		return err
	}
	req.Envs = envs
	if err := s.createPty(req); err != nil {
		return err
	}
	ps, err := s.pty(req.ID)
	if err != nil {
		return err
	}
	if !s.servePty(w, r, ps) {
		_ = s.deletePty(req.ID) // no connection: nobody will use it
	}
	return nil
}

// Subprotocols of Daytona's PTY WebSocket.
const (
	// ptyEnvsPrefix starts the subprotocol that carries the environment
	// of create-connect: base64url (no padding) of a JSON object.
	ptyEnvsPrefix = "X-Daytona-Pty-Envs~"
	// ptyEnvsLimit bounds that subprotocol.
	ptyEnvsLimit = 64 << 10
)

// ptyEnvsSubprotocol decodes the environment a client passed in an
// X-Daytona-Pty-Envs~ subprotocol (nil when none).
func ptyEnvsSubprotocol(r *http.Request) (map[string]string, error) {
	for _, p := range offeredSubprotocols(r) {
		enc, ok := strings.CutPrefix(p, ptyEnvsPrefix)
		if !ok {
			continue
		}
		var envs map[string]string
		b, err := base64.RawURLEncoding.DecodeString(enc)
		if err == nil && len(enc) <= ptyEnvsLimit {
			err = json.Unmarshal(b, &envs)
		}
		if err != nil || len(enc) > ptyEnvsLimit {
			return nil, badRequest("invalid %s subprotocol: it must be base64url without padding of a JSON object of strings, at most %d bytes", ptyEnvsPrefix, ptyEnvsLimit)
		}
		return envs, nil
	}
	return nil, nil
}

// servePty accepts the WebSocket of PTY session ps and serves it until
// either side ends it. It reports false when the handshake failed (Accept
// has answered).
func (s *Server) servePty(w http.ResponseWriter, r *http.Request, ps *ptySession) bool {
	offered := offeredSubprotocols(r)
	// Like Daytona's daemon, agree to the first subprotocol offered: a
	// client that offers some fails a handshake that picks none.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       offered[:min(len(offered), 1)],
		InsecureSkipVerify: true, // the toolbox authenticates with tokens, not origins
	})
	if err != nil {
		return false
	}
	defer conn.CloseNow()
	conn.SetReadLimit(ptyInputLimit)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	c, code, err := ps.attach()
	if err != nil {
		_ = writeControl(ctx, conn, toolbox.PtyControl{Type: toolbox.PtyControlType, Status: toolbox.PtyStatusError, Error: err.Error()})
		if code != nil {
			closePtyExit(conn, *code)
		} else {
			closeJSON(conn, websocket.StatusInternalError, toolbox.PtyExit{ExitCode: -1, Error: err.Error()})
		}
		return true
	}
	defer ps.detach(c)
	if writeControl(ctx, conn, toolbox.PtyControl{Type: toolbox.PtyControlType, Status: toolbox.PtyStatusConnected}) != nil {
		return true
	}
	exitControl := slices.Contains(offered, toolbox.PtyExitControlSubprotocol)
	written := make(chan struct{})
	go func() {
		defer close(written)
		ps.writeOutput(ctx, conn, c, exitControl)
	}()
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			break
		}
		ps.input(data)
	}
	cancel()
	<-written
	return true
}

// writeOutput sends the output to conn, then the exit close, preceded by
// the "exited" control message when exitControl.
func (ps *ptySession) writeOutput(ctx context.Context, conn *websocket.Conn, c *ptyClient, exitControl bool) {
	for {
		select {
		case b, ok := <-c.out:
			if !ok {
				ps.mu.Lock()
				code := *ps.info.ExitCode
				ps.mu.Unlock()
				if exitControl {
					e := toolbox.NewPtyExit(code)
					_ = writeControl(ctx, conn, toolbox.PtyControl{Type: toolbox.PtyControlType, Status: toolbox.PtyStatusExited, ExitCode: &e.ExitCode, ExitReason: e.ExitReason})
				}
				closePtyExit(conn, code)
				return
			}
			if conn.Write(ctx, websocket.MessageBinary, b) != nil {
				return
			}
		case <-c.drop:
			conn.Close(websocket.StatusPolicyViolation, "slow consumer: the client did not read the terminal's output")
			return
		case <-ctx.Done():
			return
		}
	}
}

func writeControl(ctx context.Context, conn *websocket.Conn, m toolbox.PtyControl) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, b)
}

// closePtyExit closes conn as Daytona does when the terminal's process
// exited with code.
func closePtyExit(conn *websocket.Conn, code int) {
	status := websocket.StatusNormalClosure
	if code != 0 {
		status = websocket.StatusInternalError
	}
	closeJSON(conn, status, toolbox.NewPtyExit(code))
}

func closeJSON(conn *websocket.Conn, status websocket.StatusCode, v any) {
	b, _ := json.Marshal(v)
	_ = conn.Close(status, string(b))
}
