package daemon

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// The binary answer of a sync session exec (the binary extension): the
// exit code and byte counts in headers, then the command's stdout and its
// stderr, raw, streamed from the log through a fixed buffer: the server's
// memory does not grow with the output.

// logReaders holds the buffered readers that walk a log's records.
var logReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readChunk) }}

// tailOf reads the HeaderTail of a request: the bytes of each stream to
// send, -1 for all.
func tailOf(r *http.Request) (int64, error) {
	v := strings.TrimSpace(r.Header.Get(toolbox.HeaderTail))
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%s %q is not a byte count: send a decimal number above 0, or no header for all output", toolbox.HeaderTail, v)
	}
	return n, nil
}

// writeBinaryResult answers a sync exec of c, which has ended, with its
// output raw. tail is what tailOf returned. It reports whether the whole
// answer was written.
func writeBinaryResult(w http.ResponseWriter, c *command, tail int64) (bool, error) {
	c.log.attach()
	defer c.log.detach()
	size, total, err := logTotals(c.log)
	if err != nil {
		return false, err
	}
	var send, drop [2]int64
	for i, n := range total {
		send[i] = n
		if tail >= 0 && n > tail {
			send[i] = tail
		}
		drop[i] = n - send[i]
	}
	code := c.exit()
	h := w.Header()
	h.Set("Content-Type", toolbox.ContentTypeBinary)
	h.Set("Content-Length", strconv.FormatInt(send[0]+send[1], 10))
	h.Set(toolbox.HeaderCommandID, c.id)
	h.Set(toolbox.HeaderExitCode, strconv.Itoa(*code))
	h.Set(toolbox.HeaderStdoutBytes, strconv.FormatInt(send[0], 10))
	h.Set(toolbox.HeaderStderrBytes, strconv.FormatInt(send[1], 10))
	h.Set(toolbox.HeaderStdoutDropped, strconv.FormatInt(drop[0], 10))
	h.Set(toolbox.HeaderStderrDropped, strconv.FormatInt(drop[1], 10))
	w.WriteHeader(http.StatusOK)
	for i, stream := range []byte{streamStdout, streamStderr} {
		if send[i] == 0 {
			continue
		}
		if err := copyStream(w, c.log, size, stream, drop[i], send[i]); err != nil {
			return false, nil // the answer has started: the connection breaks
		}
	}
	if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return false, nil
	}
	return true, nil
}

// logTotals returns the size of l and the payload bytes of stdout and
// stderr.
func logTotals(l *cmdLog) (int64, [2]int64, error) {
	size, out, errb, err := l.streams()
	return size, [2]int64{out, errb}, err
}

// copyStream writes n payload bytes of stream to w, after skipping the
// first skip bytes of it, reading the records of l below size in order.
func copyStream(w io.Writer, l *cmdLog, size int64, stream byte, skip, n int64) error {
	br := logReaders.Get().(*bufio.Reader)
	br.Reset(&logReader{l: l, end: size})
	defer func() {
		br.Reset(nil)
		logReaders.Put(br)
	}()
	var hdr [recHeader]byte
	for n > 0 {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		rec := int64(binary.BigEndian.Uint32(hdr[1:]))
		if hdr[0] != stream {
			if _, err := br.Discard(int(rec)); err != nil {
				return err
			}
			continue
		}
		k := min(skip, rec)
		if _, err := br.Discard(int(k)); err != nil {
			return err
		}
		skip -= k
		rec -= k
		for rec > 0 && n > 0 {
			p, err := br.Peek(int(min(rec, n, int64(br.Size()))))
			if err != nil {
				return err
			}
			if _, err := w.Write(p); err != nil {
				return err
			}
			br.Discard(len(p))
			rec -= int64(len(p))
			n -= int64(len(p))
		}
		if _, err := br.Discard(int(rec)); err != nil {
			return err
		}
	}
	return nil
}

// logReader reads a log's raw bytes, records and all, up to end.
type logReader struct {
	l   *cmdLog
	off int64
	end int64
}

func (r *logReader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.end-r.off)]
	if err := r.l.readAt(p, r.off); err != nil {
		return 0, err
	}
	r.off += int64(len(p))
	return len(p), nil
}
