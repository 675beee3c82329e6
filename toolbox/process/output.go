package process

import (
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// output retains the last max bytes of one stream (all when max < 0).
//
// All of it (max < 0, ExecuteCommand's default) is kept in one buffer up
// to spillRetained bytes; beyond that the rest goes to an unlinked
// temporary file, and the final string is made once, at its exact size,
// when the stream ends (finish). So the result costs the output's size in
// memory plus at most about twice spillRetained, however much there is
// (growing one buffer by append cost up to three times the output at its
// peak, and the final string(b) one more).
//
// A bounded output fills buf linearly up to max bytes and then uses it as
// a ring whose oldest byte is at start, so retention costs one copy per
// byte and no allocation once full.
type output struct {
	mu      sync.Mutex
	max     int64
	buf     []byte // bounded: the ring
	start   int    // index of the oldest byte once full
	full    bool   // len(buf) == max and buf is a ring
	dropped int64

	// All of it (max < 0): the first bytes in mem, the next ones in the
	// spill file, and, after a failure to spill, the rest in mem again.
	mem     []byte
	head    int      // bytes in mem before the spill file
	spill   *os.File // unlinked; nil until mem is full, or when it could not be made
	spilled int64    // bytes in spill
	final   *string  // the whole stream, once finished
	err     error    // first failure to spill; the rest then stays in mem
}

// spillRetained is how many bytes of a stream retained whole stay in
// memory before the rest spills to a temporary file.
const spillRetained = 8 << 20

func (o *output) add(p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.max < 0 {
		o.addAll(p)
		return
	}
	m := int(o.max)
	if m == 0 {
		o.dropped += int64(len(p))
		return
	}
	if len(p) >= m {
		o.dropped += int64(len(o.buf) + len(p) - m)
		o.buf = append(o.buf[:0], p[len(p)-m:]...)
		o.start, o.full = 0, true
		return
	}
	if !o.full {
		k := min(m-len(o.buf), len(p))
		o.buf = append(o.buf, p[:k]...)
		p = p[k:]
		if len(o.buf) < m {
			return
		}
		o.full, o.start = true, 0
	}
	for len(p) > 0 {
		n := copy(o.buf[o.start:], p)
		p = p[n:]
		o.dropped += int64(n)
		o.start = (o.start + n) % m
	}
}

// addAll keeps p, for a stream retained whole. o.mu is held.
func (o *output) addAll(p []byte) {
	if o.final != nil {
		return // finished: later bytes have no place in the result
	}
	if o.spill == nil && o.err == nil && len(o.mem)+len(p) > spillRetained {
		o.spill, o.err = spillFile()
		o.head = len(o.mem)
	}
	if o.spill != nil {
		n, err := o.spill.Write(p)
		o.spilled += int64(n)
		if err == nil {
			return
		}
		// Keep the rest in memory: the result stays complete.
		o.err = err
		p = p[n:]
	}
	if need := len(o.mem) + len(p); need > cap(o.mem) {
		// Double, up to spillRetained while it may spill: append's growth
		// of large buffers (a quarter) allocates several times what is
		// kept.
		c := max(need, 2*cap(o.mem), 64<<10)
		if o.spill == nil && o.err == nil {
			c = max(need, min(c, spillRetained))
		}
		o.mem = append(make([]byte, 0, c), o.mem...)
	}
	o.mem = append(o.mem, p...)
}

// spillFile creates an unlinked temporary file.
func spillFile() (*os.File, error) {
	f, err := os.CreateTemp("", "agentbox-output-")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// snapshot returns the retained text and the count of dropped bytes. When
// bytes were dropped the text starts at a UTF-8 sequence boundary (up to 3
// leading continuation bytes are dropped too). Before the stream is
// finished, a snapshot of a stream retained whole that spilled reads its
// file.
func (o *output) snapshot() (string, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.max < 0 {
		return o.wholeLocked(), 0
	}
	var b strings.Builder
	b.Grow(len(o.buf))
	if o.full && o.start > 0 {
		b.Write(o.buf[o.start:])
		b.Write(o.buf[:o.start])
	} else {
		b.Write(o.buf)
	}
	return runeAligned(b.String(), o.dropped)
}

// finish ends the stream: it returns what snapshot would, and from then on
// a stream retained whole holds its text in one string, made once, and no
// spill file.
func (o *output) finish() (string, int64) {
	o.mu.Lock()
	if o.max < 0 && o.final == nil {
		s := o.wholeLocked()
		o.final = &s
		if o.spill != nil {
			o.spill.Close()
			o.spill, o.spilled = nil, 0
		}
		o.mem = nil
	}
	o.mu.Unlock()
	return o.snapshot()
}

// wholeLocked returns a stream retained whole: the final string, or what
// is in memory and in the spill file, read into one string of the exact
// size. o.mu is held.
func (o *output) wholeLocked() string {
	if o.final != nil {
		return *o.final
	}
	mem := o.mem
	if o.spill == nil {
		return string(mem)
	}
	// One buffer of the exact size, the spill file read straight into it
	// (one copy from the page cache, not two through a bounce buffer),
	// and a string made of it without copying: the result costs its size
	// once.
	b := make([]byte, len(mem)+int(o.spilled))
	n := copy(b, mem[:o.head])
	k, err := o.spill.ReadAt(b[n:n+int(o.spilled)], 0)
	if err != nil && (err != io.EOF || k < int(o.spilled)) && o.err == nil {
		o.err = err
	}
	copy(b[n+int(o.spilled):], mem[o.head:]) // kept in memory after a failed spill
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// runeAligned returns s, the retained end of a stream that lost its first
// dropped bytes, starting at a UTF-8 sequence boundary: when bytes were
// dropped, up to 3 leading continuation bytes are dropped (and counted)
// too. It does not copy s.
func runeAligned(s string, dropped int64) (string, int64) {
	if dropped > 0 {
		for i := 0; i < 3 && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
			s = s[1:]
			dropped++
		}
	}
	return s, dropped
}

// total returns the count of bytes added so far, retained or not.
func (o *output) total() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.final != nil:
		return int64(len(*o.final))
	case o.max < 0:
		return int64(len(o.mem)) + o.spilled
	}
	return int64(len(o.buf)) + o.dropped
}

// total returns the bytes both streams received.
func (s *streams) total() int64 { return s.stdout.total() + s.stderr.total() }

func (o *output) String() string {
	s, _ := o.snapshot()
	return s
}

// listeners delivers a command's output to the caller's writers. Both
// streams share one lock so that one writer passed as both Stdout and
// Stderr is never written concurrently. After a writer fails it receives
// nothing more; the first failure is kept.
type listeners struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer
	err    error
}

func (l *listeners) write(w *io.Writer, p []byte, stream string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *w == nil {
		return
	}
	if _, err := (*w).Write(p); err != nil {
		*w = nil
		if l.err == nil {
			l.err = &writerError{stream: stream, err: err}
		}
	}
}

func (l *listeners) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// writerError reports that the caller's Stdout or Stderr writer failed.
type writerError struct {
	stream string
	err    error
}

func (e *writerError) Error() string { return "process: writing " + e.stream + ": " + e.err.Error() }
func (e *writerError) Unwrap() error { return e.err }

// streams is the output side of one command: retention plus listeners.
type streams struct {
	stdout, stderr output
	l              listeners
	// skip counts the bytes of stdout and stderr that the writers drop
	// before passing any on: output a reattaching Manager already read,
	// which its follower replays. Only the follower's goroutine writes,
	// so it needs no lock.
	skip [2]int64
}

func newStreams(max int64, stdout, stderr io.Writer) *streams {
	s := &streams{l: listeners{stdout: stdout, stderr: stderr}}
	s.stdout.max, s.stderr.max = max, max
	return s
}

// stdoutWriter and stderrWriter are what the follower writes to.
func (s *streams) stdoutWriter() io.Writer { return streamWriter{s, false} }
func (s *streams) stderrWriter() io.Writer { return streamWriter{s, true} }

type streamWriter struct {
	s      *streams
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	n := len(p)
	i := 0
	if w.stderr {
		i = 1
	}
	if skip := w.s.skip[i]; skip > 0 {
		k := min(skip, int64(len(p)))
		w.s.skip[i] -= k
		p = p[k:]
		if len(p) == 0 {
			return n, nil
		}
	}
	if w.stderr {
		w.s.stderr.add(p)
		w.s.l.write(&w.s.l.stderr, p, "stderr")
	} else {
		w.s.stdout.add(p)
		w.s.l.write(&w.s.l.stdout, p, "stdout")
	}
	return n, nil
}
