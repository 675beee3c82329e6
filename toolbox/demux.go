package toolbox

import (
	"errors"
	"io"
)

// markerLen is the length of a log stream marker.
const markerLen = len(StdoutMarker)

// errDemuxClosed is returned by Write after Close.
var errDemuxClosed = errors.New("toolbox: write to closed Demuxer")

// Demuxer splits a Daytona command log, where each chunk starts with a
// 3-byte marker (StdoutMarker or StderrMarker), into two writers.
// Bytes before the first marker go to stdout. Markers and multi-byte UTF-8
// sequences may be split across Write calls in any way: up to two trailing
// bytes that could start a marker are held back until the next Write (or
// Close) decides. Bytes are passed through unchanged; a nil writer discards
// its stream.
//
// A Demuxer is not safe for concurrent use. It implements io.WriteCloser;
// Close flushes held-back bytes.
type Demuxer struct {
	w      [2]io.Writer        // stdout, stderr
	cur    int                 // 0 = stdout, 1 = stderr
	pend   [markerLen - 1]byte // held back marker prefix (all equal bytes)
	npend  int
	err    error
	closed bool
}

// NewDemuxer returns a Demuxer writing stdout and stderr (either may be nil).
func NewDemuxer(stdout, stderr io.Writer) *Demuxer {
	return &Demuxer{w: [2]io.Writer{stdout, stderr}}
}

// Write demultiplexes p. It returns an error only when a destination writer
// failed (or after Close); the error is sticky.
func (d *Demuxer) Write(p []byte) (int, error) {
	if d.closed {
		return 0, errDemuxClosed
	}
	if d.err != nil {
		return 0, d.err
	}
	n := len(p)
	if d.npend > 0 {
		m := d.pend[0]
		need := markerLen - d.npend
		i := 0
		for i < need && i < len(p) && p[i] == m {
			i++
		}
		switch {
		case i == need: // marker completed
			d.npend = 0
			d.switchTo(m)
			p = p[i:]
		case i == len(p): // still undecided
			for _, b := range p {
				d.pend[d.npend] = b
				d.npend++
			}
			return n, nil
		default: // not a marker: the held bytes are data
			k := d.npend
			d.npend = 0
			if err := d.emit(d.pend[:k]); err != nil {
				return 0, err
			}
		}
	}
	start := 0
	for j := 0; j < len(p); j++ {
		b := p[j]
		if b-StreamStdout > StreamStderr-StreamStdout { // neither stream id
			continue
		}
		rest := len(p) - j
		if rest >= markerLen {
			if p[j+1] == b && p[j+2] == b {
				if err := d.emit(p[start:j]); err != nil {
					return 0, err
				}
				d.switchTo(b)
				start = j + markerLen
				j += markerLen - 1
			}
			continue
		}
		// Fewer than markerLen bytes left: hold them back if they could start
		// a marker.
		if rest == 1 || p[j+1] == b {
			if err := d.emit(p[start:j]); err != nil {
				return 0, err
			}
			d.npend = copy(d.pend[:], p[j:])
			return n, nil
		}
	}
	if err := d.emit(p[start:]); err != nil {
		return 0, err
	}
	return n, nil
}

func (d *Demuxer) switchTo(b byte) {
	if b == StreamStderr {
		d.cur = 1
	} else {
		d.cur = 0
	}
}

func (d *Demuxer) emit(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	w := d.w[d.cur]
	if w == nil {
		return nil
	}
	if _, err := w.Write(p); err != nil {
		d.err = err
		return err
	}
	return nil
}

// Close writes held-back bytes (an incomplete marker at the end of the log
// is data) and makes further writes fail. It returns the first error of a
// destination writer, if any.
func (d *Demuxer) Close() error {
	if d.closed {
		return d.err
	}
	d.closed = true
	if d.err == nil && d.npend > 0 {
		k := d.npend
		d.npend = 0
		_ = d.emit(d.pend[:k])
	}
	return d.err
}

// demuxBytes splits a whole log at once.
func demuxBytes(log []byte) (stdout, stderr []byte) {
	var o, e bytesBuffer
	d := NewDemuxer(&o, &e)
	_, _ = d.Write(log)
	_ = d.Close()
	return o.b, e.b
}

// bytesBuffer is a minimal append-only writer that keeps nil for no output.
type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
