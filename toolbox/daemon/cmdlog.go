package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// recHeader is the size of a record header in a cmdLog: stream id and a
// big-endian uint32 payload length.
const recHeader = 5

// spillBytes is how much of a log stays in memory before it moves to a file.
const spillBytes = 1 << 20

// memBudget caps the log bytes all commands of a server keep in memory;
// beyond it new output goes to files.
const memBudget = 64 << 20

// errLogClosed is returned by reads of a log whose session was deleted.
var errLogClosed = errors.New("command log closed")

// cmdLog stores the output of one command as a sequence of records, one per
// chunk read from a stream, in the order they were read. Small logs live in
// memory; larger ones spill to a file. Readers learn about new records
// through a channel that is closed and replaced at every change.
//
// A log may be dropped (the stateless extension, once its output was
// delivered): its memory and spill file are freed and it reads as empty
// from then on. Readers that read it piece by piece (followers, snapshots)
// attach to it first, and a drop waits until the last of them detaches, so
// that none of them loses output.
type cmdLog struct {
	path string        // spill file
	fsys *fsRoot       // resolves path when set (nil: as path strings)
	mem0 *atomic.Int64 // the server's in-memory log bytes

	mu         sync.Mutex
	mem        []byte
	f          *os.File
	size       int64
	payload    [3]int64 // payload bytes by stream id (streamStdout, streamStderr)
	done       bool     // the command ended; no follower waits for more
	closed     bool
	readers    int  // attached readers
	dropWanted bool // drop once no reader is attached
	dropped    bool // freed: reads as empty, later output is discarded
	notify     chan struct{}
	err        error // first write error
	daytona    daytonaOutput
}

// newCmdLog returns an empty log spilling to path. With daytona it keeps
// Daytona's line discipline (daytonaOutput).
func newCmdLog(path string, inMemory *atomic.Int64, daytona bool) *cmdLog {
	return &cmdLog{path: path, mem0: inMemory, notify: make(chan struct{}), daytona: daytonaOutput{on: daytona}}
}

// openSpill creates the spill file: through fsys when set (the server's
// tmp dir, see Server.tmpFS), so no link planted there is followed.
func (l *cmdLog) openSpill() (*os.File, error) {
	if l.fsys != nil {
		return l.fsys.openLast(l.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	}
	return os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

// wakeLocked wakes every waiting reader. l.mu must be held.
func (l *cmdLog) wakeLocked() {
	close(l.notify)
	l.notify = make(chan struct{})
}

// write appends one record.
func (l *cmdLog) write(stream byte, p []byte) {
	if len(p) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writeLocked(stream, p)
}

// writeLocked appends one record. l.mu must be held.
func (l *cmdLog) writeLocked(stream byte, p []byte) {
	if l.closed || l.dropped || l.err != nil {
		return
	}
	if p = l.daytona.filter(stream, p); len(p) == 0 {
		return
	}
	var hdr [recHeader]byte
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	if l.f == nil && (int64(len(l.mem))+int64(len(p))+recHeader > spillBytes || l.mem0.Load() > memBudget) {
		f, err := l.openSpill()
		if err == nil {
			_, err = f.Write(l.mem)
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			l.err = fmt.Errorf("spilling the command log: %w", err)
			l.wakeLocked()
			return
		}
		l.mem0.Add(-int64(len(l.mem)))
		l.f, l.mem = f, nil
	}
	if l.f != nil {
		if err := writeRecord(l.f, hdr[:], p); err != nil {
			l.err = fmt.Errorf("writing the command log: %w", err)
			l.wakeLocked()
			return
		}
	} else {
		l.mem = append(append(l.mem, hdr[:]...), p...)
		l.mem0.Add(int64(recHeader + len(p)))
	}
	l.size += int64(recHeader + len(p))
	l.payload[stream] += int64(len(p))
	l.wakeLocked()
}

// writeRecord appends a record to a spill file with one writev, without
// copying the payload.
func writeRecord(f *os.File, hdr, p []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	bufs := [][]byte{hdr, p}
	want := len(hdr) + len(p)
	var werr error
	cerr := rc.Write(func(fd uintptr) bool {
		for want > 0 {
			n, err := unix.Writev(int(fd), bufs)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				werr = err
				return true
			}
			want -= n
			for n > 0 && len(bufs) > 0 {
				k := min(n, len(bufs[0]))
				bufs[0], n = bufs[0][k:], n-k
				if len(bufs[0]) == 0 {
					bufs = bufs[1:]
				}
			}
		}
		return true
	})
	if cerr != nil {
		return cerr
	}
	return werr
}

// finish marks the log complete for followers.
func (l *cmdLog) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		for _, stream := range l.daytona.closeLines() {
			l.writeLocked(stream, []byte{'\n'})
		}
		l.done = true
		l.wakeLocked()
	}
}

// close frees the log; later reads fail with errLogClosed.
func (l *cmdLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.freeLocked()
	l.wakeLocked()
}

// freeLocked releases the log's memory and spill file. l.mu must be held.
func (l *cmdLog) freeLocked() {
	l.mem0.Add(-int64(len(l.mem)))
	l.mem = nil
	if l.f != nil {
		l.f.Close()
		if l.fsys != nil {
			_ = l.fsys.remove(l.path)
		} else {
			os.Remove(l.path)
		}
		l.f = nil
	}
}

// attach registers a reader that reads the log piece by piece; a drop
// waits until it detaches.
func (l *cmdLog) attach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readers++
}

// detach ends what attach began, performing a pending drop when it was the
// last reader.
func (l *cmdLog) detach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readers--
	if l.readers == 0 && l.dropWanted {
		l.dropLocked()
	}
}

// drop frees the log once no reader is attached: from then on it reads as
// empty and discards output. The caller has made sure that the output was
// delivered (the stateless extension).
func (l *cmdLog) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropWanted = true
	if l.readers == 0 {
		l.dropLocked()
	}
}

func (l *cmdLog) dropLocked() {
	if l.dropped || l.closed {
		return
	}
	l.dropped = true
	l.freeLocked()
	l.size = 0
	l.payload = [3]int64{}
	l.err = nil
	l.wakeLocked()
}

// state returns the current size, whether the log is complete, and a channel
// closed at the next change.
func (l *cmdLog) state() (size int64, done bool, changed <-chan struct{}, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, true, l.notify, errLogClosed
	}
	return l.size, l.done, l.notify, l.err
}

// streams returns the log's size and its payload bytes of stdout and of
// stderr.
func (l *cmdLog) streams() (size, stdout, stderr int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, 0, errLogClosed
	}
	return l.size, l.payload[streamStdout], l.payload[streamStderr], l.err
}

// readAt fills p from offset off, which must be below the size reported by
// state.
func (l *cmdLog) readAt(p []byte, off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errLogClosed
	}
	if off+int64(len(p)) > l.size {
		return io.ErrUnexpectedEOF
	}
	if l.f == nil {
		copy(p, l.mem[off:])
		return nil
	}
	_, err := l.f.ReadAt(p, off)
	return err
}

// logCursor reads records sequentially, a whole record or part of one at
// a time.
type logCursor struct {
	l      *cmdLog
	off    int64 // next unread byte: a header, or payload when rem > 0
	rem    int   // payload bytes left in the current record
	stream byte  // stream of the current record
	hdr    [recHeader]byte
}

// more reports whether unread data remains below end, a size the caller
// got from state.
func (c *logCursor) more(end int64) bool { return c.off < end }

// head returns the stream and remaining payload of the current record,
// reading the next header first when the previous record is done (fresh).
func (c *logCursor) head() (stream byte, rem int, fresh bool, err error) {
	if c.rem > 0 {
		return c.stream, c.rem, false, nil
	}
	if err := c.l.readAt(c.hdr[:], c.off); err != nil {
		return 0, 0, false, err
	}
	c.stream, c.rem = c.hdr[0], int(binary.BigEndian.Uint32(c.hdr[1:]))
	c.off += recHeader
	return c.stream, c.rem, true, nil
}

// take appends the next n payload bytes of the current record to buf; n
// must not exceed what head reported.
func (c *logCursor) take(buf []byte, n int) ([]byte, error) {
	start := len(buf)
	buf = slices.Grow(buf, n)[:start+n]
	if err := c.l.readAt(buf[start:], c.off); err != nil {
		return buf[:start], err
	}
	c.off += int64(n)
	c.rem -= n
	return buf, nil
}

// next appends the next whole record's payload to buf and returns its
// stream; ok is false when end was reached.
func (c *logCursor) next(buf []byte, end int64) (out []byte, stream byte, ok bool, err error) {
	if !c.more(end) {
		return buf, 0, false, nil
	}
	stream, n, _, err := c.head()
	if err != nil {
		return buf, 0, false, err
	}
	if buf, err = c.take(buf, n); err != nil {
		return buf, 0, false, err
	}
	return buf, stream, true, nil
}

// markerOf returns the Daytona log marker of stream.
func markerOf(stream byte) string {
	if stream == streamStderr {
		return toolbox.StderrMarker
	}
	return toolbox.StdoutMarker
}

// Forms of a log a snapshot can build.
const (
	formRaw      = 1 << iota // Daytona log: marker + chunk per record
	formCombined             // markers removed
	formSplit                // stdout and stderr apart
)

// logOutputs holds the forms of a log the API serves.
type logOutputs struct {
	raw      []byte
	combined []byte
	stdout   []byte
	stderr   []byte
}

// snapshot reads the whole log, building the forms asked for.
func (l *cmdLog) snapshot(forms int) (logOutputs, error) {
	l.attach()
	defer l.detach()
	size, _, _, err := l.state()
	if err != nil {
		return logOutputs{}, err
	}
	var o logOutputs
	c := logCursor{l: l}
	var buf []byte
	for {
		var stream byte
		var ok bool
		buf, stream, ok, err = c.next(buf[:0], size)
		if err != nil {
			return logOutputs{}, err
		}
		if !ok {
			return o, nil
		}
		if forms&formCombined != 0 {
			o.combined = append(o.combined, buf...)
		}
		dst := &o.stdout
		if stream == streamStderr {
			dst = &o.stderr
		}
		if forms&formRaw != 0 {
			o.raw = append(append(o.raw, markerOf(stream)...), buf...)
		}
		if forms&formSplit != 0 {
			*dst = append(*dst, buf...)
		}
	}
}
