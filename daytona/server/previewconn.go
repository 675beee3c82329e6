package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Connections of preview requests to sandboxes' ports. Nothing is
// published for a preview: a connection is made when a request comes,
// from inside the sandbox's network namespace (the engine's dialPort),
// kept idle for previewIdle for the next request of the same port, and
// closed when the sandbox stops or goes. A sandbox has at most
// maxPreviewConns open at once, so that previews of one sandbox cannot
// take every descriptor of the server.

const (
	// defaultMaxPreviewConns is how many preview connections one sandbox
	// may have open at once.
	defaultMaxPreviewConns = 128
	// previewIdle is how long an unused preview connection is kept.
	previewIdle = 30 * time.Second
	// maxIdlePreviewConns is how many unused connections of one port
	// are kept.
	maxIdlePreviewConns = 8
)

// errPreviewConns says that a sandbox has as many preview connections
// open as it may.
var errPreviewConns = errors.New("too many open preview connections")

// previewConns are the open preview connections, by sandbox id, and
// the dials in flight. Its fields are guarded by mu.
type previewConns struct {
	mu      sync.Mutex
	max     int // 0: defaultMaxPreviewConns
	open    map[string]map[*previewConn]struct{}
	dialing map[string]int
	// listeners are the preview listeners (previewlisten.go), closed
	// with the connections.
	listeners previewListeners
}

// previewConn is an open preview connection, forgotten when closed.
type previewConn struct {
	net.Conn
	pc   *previewConns
	id   string
	once sync.Once
}

// Close closes the connection and forgets it.
func (c *previewConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.pc.mu.Lock()
		defer c.pc.mu.Unlock()
		delete(c.pc.open[c.id], c)
		if len(c.pc.open[c.id]) == 0 {
			delete(c.pc.open, c.id)
		}
	})
	return err
}

// dial connects to port of sandbox id through eng, unless the sandbox
// has as many connections open (or being made) as it may.
func (pc *previewConns) dial(ctx context.Context, eng engine, id string, port int) (net.Conn, error) {
	pc.mu.Lock()
	if n := len(pc.open[id]) + pc.dialing[id]; n >= cmp.Or(pc.max, defaultMaxPreviewConns) {
		pc.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s has %d: %w", id, n, errPreviewConns)
	}
	if pc.dialing == nil {
		pc.dialing = map[string]int{}
		pc.open = map[string]map[*previewConn]struct{}{}
	}
	pc.dialing[id]++
	pc.mu.Unlock()

	conn, err := eng.dialPort(ctx, id, port)

	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.dialing[id]--; pc.dialing[id] == 0 {
		delete(pc.dialing, id)
	}
	if err != nil {
		return nil, err
	}
	c := &previewConn{Conn: conn, pc: pc, id: id}
	if pc.open[id] == nil {
		pc.open[id] = map[*previewConn]struct{}{}
	}
	pc.open[id][c] = struct{}{}
	return c, nil
}

// closeAll closes the open preview connections of sandbox id, and its
// preview listeners.
func (pc *previewConns) closeAll(id string) {
	pc.listeners.closeSandbox(id)
	pc.mu.Lock()
	conns := slices.Collect(maps.Keys(pc.open[id]))
	pc.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// count returns how many preview connections sandbox id has open.
func (pc *previewConns) count(id string) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return len(pc.open[id])
}

// newPreviewTransport returns the transport of preview requests: their
// URL's host is "{sandboxId}:{port}", dialed through pc.
func newPreviewTransport(pc *previewConns, eng engine) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			id, p, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, err := strconv.Atoi(p)
			if err != nil {
				return nil, err
			}
			return pc.dial(ctx, eng, id, port)
		},
		MaxIdleConnsPerHost: maxIdlePreviewConns,
		IdleConnTimeout:     previewIdle,
		DisableCompression:  true,
	}
}

// previewDialError returns what a preview client is told when the
// sandbox's port could not be reached because of err.
func previewDialError(id string, port int, err error) *httpError {
	switch {
	case errors.Is(err, errPreviewConns):
		return &httpError{Status: http.StatusServiceUnavailable, Err: err,
			Message: fmt.Sprintf("sandbox %s has as many open preview connections as it may: close some, or retry later", id)}
	case errors.Is(err, sandbox.ErrInvalidArgument):
		return &httpError{Status: http.StatusConflict, Err: err,
			Message: fmt.Sprintf("port %d of sandbox %s cannot be reached: its network has loopback only (it blocks all traffic or allows domains only), or it does not run", port, id)}
	}
	return &httpError{Status: http.StatusBadGateway, Err: err,
		Message: fmt.Sprintf("nothing answered on port %d of sandbox %s: its server must listen on 0.0.0.0", port, id)}
}
