package daemon

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// logMode is how logs are presented to a client, by its SDK version (see
// the table in reference/daytona-api.md §5.4).
type logMode int

const (
	modeCombined logMode = iota // markers removed
	modeRaw                     // raw log with markers
	modeJSON                    // JSON {output, stdout, stderr}; raw with markers on WebSocket
)

// subprotocolPrefix is how browsers pass the SDK version on a WebSocket.
const subprotocolPrefix = toolbox.HeaderSDKVersion + "~"

// sdkVersion returns the client's SDK version from the header or from a
// WebSocket subprotocol.
func sdkVersion(r *http.Request) string {
	if v := strings.TrimSpace(r.Header.Get(toolbox.HeaderSDKVersion)); v != "" {
		return v
	}
	for _, p := range offeredSubprotocols(r) {
		if len(p) > len(subprotocolPrefix) && strings.EqualFold(p[:len(subprotocolPrefix)], subprotocolPrefix) {
			return p[len(subprotocolPrefix):]
		}
	}
	return ""
}

func offeredSubprotocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// logModeOf picks the log presentation for a request.
func logModeOf(r *http.Request) logMode {
	v := sdkVersion(r)
	if v != "" {
		if strings.Contains(strings.ToLower(v), "dev") {
			return modeJSON
		}
		if ver, ok := parseSemver(v); ok {
			switch {
			case !ver.less([3]int{0, 27, 0}):
				if !ver.less([3]int{0, 167, 0}) {
					return modeJSON
				}
				return modeRaw
			default:
				return modeCombined
			}
		}
	}
	if strings.EqualFold(strings.TrimSpace(r.Header.Get(toolbox.HeaderSplitOutput)), "true") {
		return modeRaw
	}
	return modeCombined
}

type semver [3]int

func (a semver) less(b semver) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// parseSemver reads "v1.2.3", "1.2.3-rc.1+meta" or "1.2"; pre-release and
// build parts are ignored.
func parseSemver(v string) (semver, bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return semver{}, false
	}
	var out semver
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return semver{}, false
		}
		out[i] = n
	}
	return out, true
}

func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) error {
	ss, c, err := s.lookup(r)
	if err != nil {
		return err
	}
	return s.serveLogs(w, r, ss, c)
}

// serveLogs answers a logs request for command c of session ss: its log so
// far, or a WebSocket following it.
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request, ss *session, c *command) error {
	c.tether.touch()
	if isWebSocket(r) {
		s.followLogs(w, r, ss, c)
		return nil
	}
	mode := logModeOf(r)
	forms := formCombined
	switch mode {
	case modeJSON:
		forms = formRaw | formSplit
	case modeRaw:
		forms = formRaw
	}
	out, err := c.log.snapshot(forms)
	if err != nil {
		return errSessionDeleted(ss)
	}
	if mode == modeJSON {
		resp := toolbox.SessionCommandLogsResponse{Output: string(out.raw)}
		if uses(r, toolbox.ExtBase64) {
			resp.Stdout = base64.StdEncoding.EncodeToString(out.stdout)
			resp.Stderr = base64.StdEncoding.EncodeToString(out.stderr)
			w.Header().Set(toolbox.HeaderEncoding, toolbox.EncodingBase64)
		} else {
			resp.Stdout, resp.Stderr = string(out.stdout), string(out.stderr)
		}
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	body := out.combined
	if mode == modeRaw {
		body = out.raw
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

func isWebSocket(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "upgrade") {
				return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
			}
		}
	}
	return false
}

// maxMessage is the largest WebSocket message the follower sends; it fits
// the default read limit of common WebSocket libraries (Go's
// coder/websocket: 32 KiB).
const maxMessage = 32 << 10

// maxFramesMessage is the largest message sent to a client using the
// frames extension (agentbox's own client reads up to 64 MiB): fewer,
// larger messages stream faster.
const maxFramesMessage = 256 << 10

// followLogs streams a command's log over a WebSocket: the whole log from
// byte 0, then new output the moment it is read. It closes with 1000 when
// the command has ended and everything was sent. Without follow=true it
// sends the current content and closes.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request, ss *session, c *command) {
	frames := uses(r, toolbox.ExtFrames)
	follow := r.URL.Query().Get("follow") == "true"
	fc, ok := acceptFollow(w, r)
	if !ok {
		return // Accept has answered
	}
	defer fc.closeNow()
	// A follower is a tethered command's sign of life while it lasts.
	defer c.tether.hold()()
	// Server shutdown cancels ctx but not the reader (that would drop the
	// connection without a close).
	ctx, cancel := context.WithCancel(fc.readCtx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	c.log.attach()
	defer c.log.detach()
	mb := messageBuilder{cur: logCursor{l: c.log}, frames: frames, mode: logModeOf(r), limit: maxMessage}
	if frames {
		mb.limit = maxFramesMessage
	}
	for {
		size, done, changed, err := c.log.state()
		if err != nil {
			closeOnLogError(fc.Conn, err, frames)
			return
		}
		// Send everything up to size.
		for mb.cur.more(size) {
			msg, err := mb.next(size)
			if err != nil {
				closeOnLogError(fc.Conn, err, frames)
				return
			}
			if len(msg) > 0 && fc.Write(ctx, websocket.MessageBinary, msg) != nil {
				return
			}
		}
		if !follow || (done && s.closeTailOver(ctx, changed, ss.killedCh)) {
			fc.closeSent(c, frames && done)
			return
		}
		select {
		case <-changed:
		case <-ss.killedCh:
			fc.Close(websocket.StatusNormalClosure, killedReason(frames))
			return
		case <-ctx.Done():
			if s.ctx.Err() != nil {
				fc.Close(websocket.StatusGoingAway, "server shutting down")
			}
			return
		}
	}
}

// followConn is the WebSocket of a log follow and the goroutine reading it.
// We never expect messages; reading handles pings and notices the close.
// Like conn.CloseRead, but keeping the error, which tells whether the
// client answered our close.
type followConn struct {
	*websocket.Conn
	readCtx    context.Context // done when the reader ends
	readCancel context.CancelFunc
	readDone   chan struct{}
	readErr    error // valid after readDone
}

// acceptFollow accepts the WebSocket of a log follow and starts reading it.
// It reports false when the handshake failed (Accept has answered).
func acceptFollow(w http.ResponseWriter, r *http.Request) (*followConn, bool) {
	var protos []string
	for _, p := range offeredSubprotocols(r) {
		if strings.HasPrefix(strings.ToLower(p), strings.ToLower(subprotocolPrefix)) {
			protos = append(protos, p)
		}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       protos,
		InsecureSkipVerify: true, // the toolbox authenticates with tokens, not origins
	})
	if err != nil {
		return nil, false
	}
	fc := &followConn{Conn: conn, readDone: make(chan struct{})}
	fc.readCtx, fc.readCancel = context.WithCancel(r.Context())
	go func() {
		defer close(fc.readDone)
		defer fc.readCancel()
		_, _, fc.readErr = conn.Reader(fc.readCtx)
		if fc.readErr == nil {
			conn.Close(websocket.StatusPolicyViolation, "unexpected data message")
		}
	}()
	return fc, true
}

// closeNow drops the connection and waits for the reader.
func (fc *followConn) closeNow() {
	fc.CloseNow()
	<-fc.readDone
	fc.readCancel()
}

// closeSent closes a follow that sent the whole log there is. With ended
// (the frames extension and a command that ended) the reason tells the
// exit code or that the session was deleted; when the client answers the
// close of an exit, it has read everything, and a stateless command's log
// is dropped.
func (fc *followConn) closeSent(c *command, ended bool) {
	reason, exited := "", false
	if ended {
		switch code, killed := c.ended(); {
		case killed:
			reason = toolbox.CloseReasonKilled
		case code != nil:
			reason, exited = toolbox.CloseReasonExitPrefix+strconv.Itoa(*code), true
		}
	}
	err := fc.Close(websocket.StatusNormalClosure, reason)
	if exited && c.stateless {
		<-fc.readDone
		if closeAnswered(fc.readErr, err, reason) {
			c.log.drop()
		}
	}
}

// messageBuilder cuts a log into WebSocket messages of at most limit
// bytes, coalescing or splitting records as needed: with frames, a stream
// id byte and one stream's bytes per message; else Daytona's log, with
// markers (mode modeRaw, modeJSON) or without (modeCombined).
type messageBuilder struct {
	cur    logCursor
	frames bool
	mode   logMode
	limit  int
	msg    []byte // reused
}

// next returns the next message from the log below size, a size the caller
// got from the log's state. The message is valid until the next call.
func (b *messageBuilder) next(size int64) ([]byte, error) {
	msg := b.msg[:0]
	defer func() { b.msg = msg[:0] }()
	var lastStream byte
	for b.cur.more(size) {
		room := b.limit - len(msg)
		if room <= 0 || (b.mode != modeCombined && !b.frames && room <= len(toolbox.StdoutMarker)) {
			break
		}
		stream, n, fresh, err := b.cur.head()
		if err != nil {
			return nil, err
		}
		switch {
		case b.frames:
			if len(msg) > 0 && stream != lastStream {
				return msg, nil // one stream per message
			}
			if len(msg) == 0 {
				msg = append(msg, stream)
				room--
			}
			lastStream = stream
		case b.mode == modeCombined:
		case fresh:
			marker := markerOf(stream)
			msg = append(msg, marker...)
			room -= len(marker)
		}
		if msg, err = b.cur.take(msg, min(n, room)); err != nil {
			return nil, err
		}
	}
	return msg, nil
}

// closeAnswered reports whether the client answered our close (code 1000
// with reason) with the same close, which a client sends only once it has
// read everything before ours. readErr is what our reader goroutine got;
// closeErr what conn.Close returned. The answer reaches our reader, or, when
// that had not started reading yet, conn.Close, which then returns nil (it
// checks the code, not the reason) and leaves the reader net.ErrClosed.
func closeAnswered(readErr, closeErr error, reason string) bool {
	var ce websocket.CloseError
	if errors.As(readErr, &ce) {
		return ce.Code == websocket.StatusNormalClosure && ce.Reason == reason
	}
	return closeErr == nil && errors.Is(readErr, net.ErrClosed)
}

func killedReason(frames bool) string {
	if frames {
		return toolbox.CloseReasonKilled
	}
	return ""
}

// closeOnLogError closes a follow whose log could not be read: as killed
// when the session was deleted, else as an internal error.
func closeOnLogError(conn *websocket.Conn, err error, frames bool) {
	if err == errLogClosed {
		conn.Close(websocket.StatusNormalClosure, killedReason(frames))
	} else {
		conn.Close(websocket.StatusInternalError, "reading the log failed")
	}
}
