package toolbox

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The client side of the binary extension (ExtBinary): a sync exec's
// output read raw, each stream into a string allocated once at its size.

// copyBufs holds the buffers that binary answers are read through.
var copyBufs = sync.Pool{New: func() any {
	b := make([]byte, 256<<10)
	return &b
}}

// isBinaryResult reports whether resp is a binary exec answer.
func isBinaryResult(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == ContentTypeBinary && resp.Header.Get(HeaderExitCode) != ""
}

// readBinaryResult reads a binary exec answer.
func readBinaryResult(resp *http.Response) (*ExecResult, error) {
	h := resp.Header
	code, err := strconv.Atoi(strings.TrimSpace(h.Get(HeaderExitCode)))
	if err != nil {
		return nil, fmt.Errorf("%s %q is not an exit code", HeaderExitCode, h.Get(HeaderExitCode))
	}
	res := &ExecResult{CmdID: h.Get(HeaderCommandID), ExitCode: &code}
	var n [2]int64
	for i, f := range []struct {
		name string
		dst  *int64
	}{
		{HeaderStdoutBytes, &n[0]}, {HeaderStderrBytes, &n[1]},
		{HeaderStdoutDropped, &res.StdoutDropped}, {HeaderStderrDropped, &res.StderrDropped},
	} {
		v := strings.TrimSpace(h.Get(f.name))
		if v == "" && i >= 2 {
			continue // no drop
		}
		if *f.dst, err = strconv.ParseInt(v, 10, 64); err != nil || *f.dst < 0 {
			return nil, fmt.Errorf("%s %q is not a byte count", f.name, v)
		}
	}
	if n[0] > maxOutputBytes-n[1] {
		// Before allocating: the sizes are the server's word.
		return nil, tooLarge(fmt.Sprintf("the output (%d bytes of stdout, %d of stderr; keep its tail with SessionExecOptions.Tail)", n[0], n[1]), maxOutputBytes)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	if res.Stdout, err = readString(resp.Body, n[0], *bp); err != nil {
		return nil, fmt.Errorf("reading %d bytes of stdout: %w", n[0], err)
	}
	if res.Stderr, err = readString(resp.Body, n[1], *bp); err != nil {
		return nil, fmt.Errorf("reading %d bytes of stderr: %w", n[1], err)
	}
	return res, nil
}

// readString reads exactly n bytes of r into a string allocated once,
// through buf.
func readString(r io.Reader, n int64, buf []byte) (string, error) {
	if n == 0 {
		return "", nil
	}
	var b strings.Builder
	b.Grow(int(n))
	if _, err := io.CopyBuffer(&b, io.LimitReader(r, n), buf); err != nil {
		return "", err
	}
	if int64(b.Len()) != n {
		return "", io.ErrUnexpectedEOF
	}
	return b.String(), nil
}
