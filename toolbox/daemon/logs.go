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

func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	ss, c, err := s.lookup(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if isWebSocket(r) {
		s.followLogs(w, r, ss, c)
		return
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
		s.writeError(w, r, notFound("session %q was deleted", ss.id))
		return
	}
	if mode == modeJSON {
		resp := toolbox.SessionCommandLogsResponse{Output: string(out.raw)}
		if uses(r, "base64") {
			resp.Stdout = base64.StdEncoding.EncodeToString(out.stdout)
			resp.Stderr = base64.StdEncoding.EncodeToString(out.stderr)
			w.Header().Set(headerEncoding, "base64")
		} else {
			resp.Stdout, resp.Stderr = string(out.stdout), string(out.stderr)
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	body := out.combined
	if mode == modeRaw {
		body = out.raw
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
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
	var protos []string
	for _, p := range offeredSubprotocols(r) {
		if strings.HasPrefix(strings.ToLower(p), strings.ToLower(subprotocolPrefix)) {
			protos = append(protos, p)
		}
	}
	mode := logModeOf(r)
	frames := uses(r, "frames")
	follow := r.URL.Query().Get("follow") == "true"
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       protos,
		InsecureSkipVerify: true, // the toolbox authenticates with tokens, not origins
	})
	if err != nil {
		return // Accept has answered
	}
	// We never expect messages; reading handles pings and notices the
	// close. Like conn.CloseRead, but keeping the error, which tells
	// whether the client answered our close. Server shutdown cancels ctx
	// but not the reader (that would drop the connection without a close).
	readCtx, readCancel := context.WithCancel(r.Context())
	defer readCancel()
	ctx, cancel := context.WithCancel(readCtx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	readDone := make(chan struct{})
	var readErr error
	go func() {
		defer close(readDone)
		defer readCancel()
		_, _, readErr = conn.Reader(readCtx)
		if readErr == nil {
			conn.Close(websocket.StatusPolicyViolation, "unexpected data message")
		}
	}()
	defer func() {
		conn.CloseNow()
		<-readDone
	}()

	c.log.attach()
	defer c.log.detach()
	cur := logCursor{l: c.log}
	var msg []byte
	limit := maxMessage
	if frames {
		limit = maxFramesMessage
	}
	for {
		size, done, changed, err := c.log.state()
		if err != nil {
			if err == errLogClosed {
				conn.Close(websocket.StatusNormalClosure, killedReason(frames))
			} else {
				conn.Close(websocket.StatusInternalError, "reading the log failed")
			}
			return
		}
		// Send everything up to size, in messages of at most maxMessage
		// bytes: records are coalesced or split as needed.
		for cur.more(size) {
			msg = msg[:0]
			var lastStream byte
		fill:
			for cur.more(size) {
				room := limit - len(msg)
				if room <= 0 || (mode != modeCombined && !frames && room <= len(stdoutMarker)) {
					break
				}
				stream, n, fresh, herr := cur.head()
				if herr != nil {
					err = herr
					break
				}
				switch {
				case frames:
					if len(msg) > 0 && stream != lastStream {
						break fill // one stream per message
					}
					if len(msg) == 0 {
						msg = append(msg, stream)
						room--
					}
					lastStream = stream
				case mode == modeCombined:
				case fresh && stream == streamStderr:
					msg = append(msg, stderrMarker...)
					room -= len(stderrMarker)
				case fresh:
					msg = append(msg, stdoutMarker...)
					room -= len(stdoutMarker)
				}
				if msg, err = cur.take(msg, min(n, room)); err != nil {
					break
				}
			}
			if err != nil {
				if err == errLogClosed {
					conn.Close(websocket.StatusNormalClosure, killedReason(frames))
				} else {
					conn.Close(websocket.StatusInternalError, "reading the log failed")
				}
				return
			}
			if len(msg) > 0 {
				if werr := conn.Write(ctx, websocket.MessageBinary, msg); werr != nil {
					return
				}
			}
		}
		if done || !follow {
			reason := ""
			if frames && done {
				c.mu.Lock()
				killed, code := c.killed, c.exitCode
				c.mu.Unlock()
				switch {
				case killed:
					reason = "killed"
				case code != nil:
					reason = "exit=" + strconv.Itoa(*code)
				}
			}
			err := conn.Close(websocket.StatusNormalClosure, reason)
			if frames && done && c.stateless && strings.HasPrefix(reason, toolbox.CloseReasonExitPrefix) {
				<-readDone
				if closeAnswered(readErr, err, reason) {
					// The client has read every message before our
					// close: the log of a stateless command is not
					// needed any more.
					c.log.drop()
				}
			}
			return
		}
		select {
		case <-changed:
		case <-ss.killedCh:
			conn.Close(websocket.StatusNormalClosure, killedReason(frames))
			return
		case <-ctx.Done():
			if s.ctx.Err() != nil {
				conn.Close(websocket.StatusGoingAway, "server shutting down")
			}
			return
		}
	}
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
		return "killed"
	}
	return ""
}
