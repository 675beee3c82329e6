package toolbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// wsPingInterval keeps a follow socket alive through proxies with idle
// timeouts; Daytona's daemon sends no pings of its own.
const wsPingInterval = 25 * time.Second

// wsReadLimit bounds one WebSocket message.
const wsReadLimit = 64 << 20

// FollowLogs streams the output of a session command to stdout and stderr
// (either may be nil) until the command ends. Writes happen from the
// calling goroutine, in order, never concurrently.
//
// It follows over a WebSocket (with the frames extension when the server
// offers it, else demultiplexing Daytona's marked log). Without frames it
// first looks at the command (GET …/command/{id}): one that has ended is
// read whole by one GET …/logs of the raw marked log, so that a short
// command costs its exec and these two requests. Otherwise the
// socket does not tell the exit code, and Daytona's closes only about a
// second after the command ended: meanwhile the command is looked at
// (GET …/command/{id}, every few milliseconds at first, backing off), and
// once it has ended and the socket has brought nothing for a moment, the
// follow leaves the socket and reads the rest of the log by offset (one
// GET …/logs of the raw marked log). When the socket closes normally first,
// it brought everything; the exit code is the one seen, or one
// GET …/command/{id} fetches it. It falls back to polling
// GET …/logs every PollInterval when the socket cannot be opened, closes
// abnormally, or closes while the command still runs. Every source replays the log from
// its start; FollowLogs writes each byte once. The socket is read piece by
// piece; a log read by GET …/logs (the rest after the socket, polling) is
// read whole, and a log larger than MaxOutputBytes fails the follow with
// an error matching ErrTooLarge.
//
// The result says what the follow learned: the exit code (frames close
// reason, the command after a normal close, or polling), whether the
// session was deleted meanwhile, and whether the server knows that the
// whole log was delivered. Cancelling ctx returns ctx's error promptly.
func (c *Client) FollowLogs(ctx context.Context, sessionID, cmdID string, stdout, stderr io.Writer) (FollowResult, error) {
	return c.followLogs(ctx, sessionID, cmdID, stdout, stderr, nil, 0)
}

func (c *Client) followLogs(ctx context.Context, sessionID, cmdID string, stdout, stderr io.Writer, exit <-chan int, grace time.Duration) (FollowResult, error) {
	if err := checkID("session ID", sessionID); err != nil {
		return FollowResult{}, err
	}
	if err := checkID("command ID", cmdID); err != nil {
		return FollowResult{}, err
	}
	f := &follower{c: c, sid: sessionID, cid: cmdID, w: [2]io.Writer{stdout, stderr}, exit: exit, grace: grace}
	f.dmx = NewDemuxer(streamWriter{f, 0}, streamWriter{f, 1})
	if !c.noWS {
		if e, known := c.cachedExtensions(); known && !e.Frames {
			// Daytona's daemon: a command that already ended (a short
			// one, by the time this look arrives) is read whole in one
			// request, not through a socket that tells no exit code and
			// lingers a second.
			early := f.endedEarly
			if f.exit != nil {
				early = f.exitEarly
			}
			if r, done, err := early(ctx); done || err != nil {
				return r, err
			}
		}
		r, err := f.websocket(ctx)
		if err != nil {
			return FollowResult{}, err
		}
		if r.done {
			return r.FollowResult, nil
		}
		if r.exited != nil && r.clean {
			// The socket closed normally after the command ended: it
			// brought the whole log.
			return f.exited(*r.exited)
		}
		if r.exited != nil {
			// The command ended while the socket lingered: the log is
			// complete, and what the socket did not bring is read by
			// offset.
			a, err := f.fetchRest(ctx)
			if err != nil {
				return f.pollErr(ctx, err)
			}
			if err := f.feedLogs(a, true); err != nil {
				return FollowResult{}, err
			}
			return f.exited(*r.exited)
		}
		if r.clean && f.exit != nil {
			// The caller brings the exit code: wait for it, then read
			// what an early close may have left out.
			if r, done, err := f.exitClosed(ctx); done {
				return r, err
			}
		}
		if r.clean {
			// A server closes normally when the command ended and its
			// log was sent: one look at the command settles it, and only
			// a command still running (an early close) needs polling.
			cmd, err := c.GetCommand(ctx, sessionID, cmdID)
			if err != nil {
				return f.pollErr(ctx, err)
			}
			if cmd.ExitCode != nil {
				return f.exited(*cmd.ExitCode)
			}
		}
	}
	return f.poll(ctx)
}

// FollowResult is what FollowLogs learned about a command.
type FollowResult struct {
	// ExitCode is the command's exit code when the follow learned it,
	// else nil: then ask GetCommand.
	ExitCode *int
	// Killed reports that the session was deleted while following.
	Killed bool
	// Delivered reports that the follow ended with the frames extension's
	// "exit=<code>" close, which the client answered: the server knows
	// that the whole log arrived, and drops the log of a command run with
	// the stateless extension (it then reads as empty).
	Delivered bool
}

// follower de-duplicates output across sources that each replay the log
// from byte 0. raw counts the bytes of the marked log consumed by dmx (-1:
// unknown, after a frames source); per stream, emitted counts bytes
// written and pos the bytes the current source has produced so far.
type follower struct {
	c        *Client
	sid, cid string
	w        [2]io.Writer
	emitted  [2]int64
	pos      [2]int64
	raw      int64
	dmx      *Demuxer
	seen     bool // the command was seen to exist during this follow
	looked   bool // endedEarly looked at the command: exitWatch waits before its first look
	werr     error
	active   atomic.Int64 // when the socket last brought data (Unix ns), for exitWatch
	exit     <-chan int   // FollowOptions.Exit; cleared once closed without a code
	grace    time.Duration
}

// wsOutcome is how a follow over a WebSocket ended.
type wsOutcome struct {
	FollowResult      // what the frames close told, when done
	done         bool // the close told the end: the exit code or killed
	clean        bool // not done, but the socket closed normally (1000)
	exited       *int // not done, but the command was seen to end (exitWatch)
}

// closedNormally reports whether err is the server's normal close (1000).
func closedNormally(err error) bool {
	var ce websocket.CloseError
	return errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure
}

type streamWriter struct {
	f *follower
	s int
}

func (w streamWriter) Write(p []byte) (int, error) {
	if err := w.f.emit(w.s, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// emit writes the part of p not written before.
func (f *follower) emit(s int, p []byte) error {
	if f.werr != nil {
		return f.werr
	}
	skip := f.emitted[s] - f.pos[s]
	f.pos[s] += int64(len(p))
	if skip >= int64(len(p)) {
		return nil
	}
	if skip > 0 {
		p = p[skip:]
	}
	f.emitted[s] += int64(len(p))
	if f.w[s] == nil {
		return nil
	}
	if _, err := f.w[s].Write(p); err != nil {
		f.werr = fmt.Errorf("toolbox: follow logs: writing output: %w", err)
		return f.werr
	}
	return nil
}

// feedRaw consumes data found at offset off of the marked log.
func (f *follower) feedRaw(off int64, data []byte) error {
	if f.raw < 0 {
		if off != 0 {
			return nil
		}
		// A new pass over the whole log: start a fresh demuxer and let
		// the per-stream counts skip what was already written.
		f.dmx = NewDemuxer(streamWriter{f, 0}, streamWriter{f, 1})
		f.pos = [2]int64{}
		f.raw = 0
	}
	skip := f.raw - off
	if skip >= int64(len(data)) {
		return nil
	}
	if skip < 0 {
		return nil // a gap cannot be filled from this data
	}
	data = data[skip:]
	f.raw += int64(len(data))
	if _, err := f.dmx.Write(data); err != nil {
		if f.werr != nil {
			return f.werr
		}
		return err
	}
	return nil
}

func (f *follower) logsPath() string { return commandPath(f.sid, f.cid) + "/logs" }

// endedEarly looks at the command once before a follow without frames
// opens its socket: when the command has ended, the whole log is read in
// one request and done reports that the follow is over. An error of the
// look but ctx's leaves the following to the socket.
func (f *follower) endedEarly(ctx context.Context) (r FollowResult, done bool, err error) {
	cmd, err := f.c.GetCommand(ctx, f.sid, f.cid)
	if err != nil {
		if ctx.Err() != nil {
			return FollowResult{}, true, ctx.Err()
		}
		return FollowResult{}, false, nil
	}
	f.seen, f.looked = true, true
	if cmd.ExitCode == nil {
		return FollowResult{}, false, nil
	}
	a, err := f.fetchRest(ctx)
	if err != nil {
		r, err := f.pollErr(ctx, err)
		return r, true, err
	}
	if err := f.feedLogs(a, true); err != nil {
		return FollowResult{}, true, err
	}
	r, err = f.exited(*cmd.ExitCode)
	return r, true, err
}

// websocket follows over a WebSocket. A result with done=false means: poll.
func (f *follower) websocket(ctx context.Context) (wsOutcome, error) {
	ext, err := f.c.Extensions(ctx)
	if err != nil && ctx.Err() != nil {
		return wsOutcome{}, ctx.Err()
	}
	hdr := http.Header{}
	if ext.Frames {
		hdr.Set(HeaderUseExtensions, ExtFrames)
	}
	conn, resp, err := websocket.Dial(ctx, f.c.base+f.logsPath()+"?follow=true", &websocket.DialOptions{
		HTTPClient:      f.c.hc,
		HTTPHeader:      hdr,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if ctx.Err() != nil {
			return wsOutcome{}, ctx.Err()
		}
		return wsOutcome{}, nil
	}
	conn.SetReadLimit(wsReadLimit)
	frames := ext.Frames
	if resp != nil {
		if v, ok := resp.Header[http.CanonicalHeaderKey(HeaderExtensions)]; ok {
			frames = frames && parseExtensions(strings.Join(v, ",")).Frames
		}
	}
	f.seen = true
	stopPings := keepAlive(ctx, conn)
	defer func() {
		_ = conn.CloseNow()
		stopPings()
	}()

	if frames {
		// This source restarts the per-stream counts; the marked log's
		// offset is unknown from here on.
		f.pos = [2]int64{}
		f.raw = -1
	}
	var off int64 // offset in the marked log, without frames
	rctx := ctx
	var watch *exitWatch
	if !frames {
		f.active.Store(time.Now().UnixNano())
		watch = f.watchExit(ctx)
		defer watch.stop()
		rctx = watch.ctx
	}
	buf := make([]byte, wsReadChunk)
	for {
		err, ferr := f.readMessage(rctx, conn, frames, buf, &off)
		if ferr != nil {
			return wsOutcome{}, ferr
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return wsOutcome{}, ctx.Err()
		}
		if watch != nil {
			if code := watch.stop(); code != nil {
				return wsOutcome{exited: code, clean: closedNormally(err)}, nil
			}
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure && frames {
			switch {
			case ce.Reason == CloseReasonKilled:
				return wsOutcome{FollowResult: FollowResult{Killed: true}, done: true}, nil
			case strings.HasPrefix(ce.Reason, CloseReasonExitPrefix):
				if n, err := strconv.Atoi(strings.TrimPrefix(ce.Reason, CloseReasonExitPrefix)); err == nil {
					return wsOutcome{FollowResult: FollowResult{ExitCode: &n, Delivered: true}, done: true}, nil
				}
			}
		}
		// A plain close, an abnormal close or a broken link: the exit
		// code is still unknown.
		return wsOutcome{clean: closedNormally(err)}, nil
	}
}

// wsPingTimeout bounds the answer to one ping.
const wsPingTimeout = 10 * time.Second

// keepAlive pings conn every wsPingInterval until the returned function is
// called, which waits for the pinging goroutine to end.
func keepAlive(ctx context.Context, conn *websocket.Conn) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(wsPingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				pctx, cancel := context.WithTimeout(ctx, wsPingTimeout)
				_ = conn.Ping(pctx)
				cancel()
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// wsReadChunk is the size of the buffer a follow reads messages into.
const wsReadChunk = 256 << 10

// readMessage reads one message into buf piece by piece and hands the
// pieces on as they come: with frames, the first byte names the stream of
// the rest; without, the message continues the marked log at *off. err is
// a read error (a close among them); ferr a failure to pass output on.
func (f *follower) readMessage(ctx context.Context, conn *websocket.Conn, frames bool, buf []byte, off *int64) (err, ferr error) {
	_, r, err := conn.Reader(ctx)
	if err != nil {
		return err, nil
	}
	s := -1 // frames: the message's stream, -1 until read, -2 unknown
	for {
		n, rerr := r.Read(buf)
		data := buf[:n]
		if n > 0 {
			f.active.Store(time.Now().UnixNano())
		}
		if frames && len(data) > 0 {
			if s == -1 {
				switch data[0] {
				case StreamStdout:
					s = 0
				case StreamStderr:
					s = 1
				default:
					s = -2 // unknown stream: ignore
				}
				data = data[1:]
			}
			if s >= 0 && len(data) > 0 {
				if err := f.emit(s, data); err != nil {
					return nil, err
				}
			}
		} else if len(data) > 0 {
			if err := f.feedRaw(*off, data); err != nil {
				return nil, err
			}
			*off += int64(len(data))
		}
		if rerr == io.EOF {
			return nil, nil
		}
		if rerr != nil {
			return rerr, nil
		}
	}
}

// poll follows by polling the command (for its exit code) and its log.
// Each round asks for the command first, so once the exit code is known
// the log fetched after it is complete.
func (f *follower) poll(ctx context.Context) (FollowResult, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		cmd, err := f.c.GetCommand(ctx, f.sid, f.cid)
		if err != nil {
			return f.pollErr(ctx, err)
		}
		f.seen = true
		a, err := f.fetchLogs(ctx)
		if err != nil {
			return f.pollErr(ctx, err)
		}
		if err := f.feedLogs(a, cmd.ExitCode != nil); err != nil {
			return FollowResult{}, err
		}
		if cmd.ExitCode != nil {
			return f.exited(*cmd.ExitCode)
		}
		if timer == nil {
			timer = time.NewTimer(f.c.poll)
		} else {
			timer.Reset(f.c.poll)
		}
		select {
		case <-ctx.Done():
			return FollowResult{}, ctx.Err()
		case <-timer.C:
		}
	}
}

// fetchLogs fetches a snapshot of the log, exact (base64) when the server
// offers it.
func (f *follower) fetchLogs(ctx context.Context) (*logsAnswer, error) {
	var hdr http.Header
	if e, _ := f.c.cachedExtensions(); e.Base64 {
		hdr = useExtensions(ExtBase64)
	}
	return f.c.logs(ctx, f.sid, f.cid, hdr)
}

// feedLogs consumes one polled snapshot of the log. With the base64
// extension the streams are exact and de-duplicated per stream; otherwise
// the marked output is de-duplicated by its byte offset. A snapshot of a
// running command may end inside a UTF-8 sequence, which JSON encoding
// turned into U+FFFD: such a tail is left for the next round.
func (f *follower) feedLogs(a *logsAnswer, complete bool) error {
	if base64Encoded(a.header) {
		out, errb, err := splitOutput(a.header, nil, a.stdout, a.stderr)
		if err != nil {
			return fmt.Errorf("toolbox: GET %s: %w", f.logsPath(), err)
		}
		// The exact streams replace the marked log from here on (bytes
		// a demuxer held back are covered by them).
		f.dmx = nil
		f.raw = -1
		f.pos = [2]int64{}
		if err := f.emit(0, out); err != nil {
			return err
		}
		return f.emit(1, errb)
	}
	if a.output == nil {
		return nil
	}
	out := []byte(*a.output)
	if !complete {
		for bytes.HasSuffix(out, replacementChar) {
			out = out[:len(out)-len(replacementChar)]
		}
	}
	return f.feedRaw(0, out)
}

var replacementChar = []byte("\uFFFD")

// pollErr turns a polling error into FollowLogs' answer: a 404 after the
// command was seen means its session was deleted.
func (f *follower) pollErr(ctx context.Context, err error) (FollowResult, error) {
	if ctx.Err() != nil {
		return FollowResult{}, ctx.Err()
	}
	if f.seen && errors.Is(err, sandbox.ErrNotFound) {
		if err := f.finish(); err != nil {
			return FollowResult{}, err
		}
		return FollowResult{Killed: true}, nil
	}
	return FollowResult{}, err
}

// exited ends a follow that learned the exit code from the command itself
// (not from a frames close): the log is complete.
func (f *follower) exited(code int) (FollowResult, error) {
	if err := f.finish(); err != nil {
		return FollowResult{}, err
	}
	return FollowResult{ExitCode: &code}, nil
}

// finish flushes bytes the demuxer held back.
func (f *follower) finish() error {
	if f.raw < 0 || f.dmx == nil {
		return f.werr
	}
	if err := f.dmx.Close(); err != nil {
		if f.werr != nil {
			return f.werr
		}
		return err
	}
	return f.werr
}
