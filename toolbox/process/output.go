package process

import (
	"io"
	"sync"
	"unicode/utf8"
)

// output retains the last max bytes of one stream (all when max < 0).
// A bounded output fills buf linearly up to max bytes and then uses it as
// a ring whose oldest byte is at start, so retention costs one copy per
// byte and no allocation once full.
type output struct {
	mu      sync.Mutex
	max     int64
	buf     []byte
	start   int  // index of the oldest byte once full
	full    bool // len(buf) == max and buf is a ring
	dropped int64
}

func (o *output) add(p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.max < 0 {
		o.buf = append(o.buf, p...)
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

// snapshot returns the retained text and the count of dropped bytes. When
// bytes were dropped the text starts at a UTF-8 sequence boundary (up to 3
// leading continuation bytes are dropped too).
func (o *output) snapshot() (string, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, dropped := o.buf, o.dropped
	if o.full && o.start > 0 {
		b = append(append(make([]byte, 0, len(b)), b[o.start:]...), b[:o.start]...)
	}
	return runeAligned(string(b), dropped)
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
