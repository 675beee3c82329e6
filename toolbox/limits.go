package toolbox

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Sizes the client accepts from a toolbox server. What a sandbox sends is
// decided by the sandbox, so the client bounds every answer it reads
// whole: an answer past its limit is refused with an error matching
// ErrTooLarge, after reading at most the limit and one byte (or none, when
// Content-Length says so). Answers that are streams (Download, FollowLogs,
// Pty) are handed on piece by piece and not bounded here.
const (
	// MaxJSONBytes bounds a JSON answer without command output: lists of
	// files, sessions and commands, file info, search and find results,
	// git answers (64 MiB).
	MaxJSONBytes = 64 << 20
	// MaxOutputBytes bounds an answer that carries a command's output: a
	// synchronous exec (JSON or the binary extension's raw output, both
	// streams together), POST /process/execute and /process/code-run, a
	// log snapshot (GET …/logs without follow, as CommandLogs and the
	// polling follow read it), and the output RunCode collects (256 MiB).
	// Bound a command's output with SessionExecOptions.Tail, or stream it
	// with an async exec and FollowLogs.
	MaxOutputBytes = 256 << 20
)

// ErrTooLarge is matched (errors.Is) by the error of an answer (or, in
// package workspace, a file) larger than the limit the host sets for it.
var ErrTooLarge = errors.New("larger than the host's limit")

// tooLargeError is an error matching ErrTooLarge with its own message.
type tooLargeError struct{ msg string }

func (e *tooLargeError) Error() string        { return e.msg }
func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }

// The limits in force; tests lower them.
var (
	maxJSONBytes   int64 = MaxJSONBytes
	maxOutputBytes int64 = MaxOutputBytes
)

// tooLarge is the error of an answer larger than limit.
func tooLarge(what string, limit int64) error {
	return &tooLargeError{fmt.Sprintf("%s is larger than the client's limit of %s", what, FormatSize(limit))}
}

// readAnswer reads resp's body whole, refusing one larger than limit
// without reading more than limit+1 bytes of it.
func readAnswer(resp *http.Response, limit int64, what string) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, tooLarge(fmt.Sprintf("%s (%d bytes)", what, resp.ContentLength), limit)
	}
	b, err := readAll(io.LimitReader(resp.Body, limit+1), resp.ContentLength, limit+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(what, limit)
	}
	return b, nil
}

// readAll reads r to its end, of at most max bytes, into a buffer sized
// for size when known (≥ 0) and else doubled as it fills: what it
// allocates stays within about twice what it read (io.ReadAll's smaller
// steps allocate several times that for large answers).
func readAll(r io.Reader, size, max int64) ([]byte, error) {
	n := int64(32 << 10)
	if size >= 0 {
		n = size + 1 // and one byte to see the end
	}
	b := make([]byte, 0, min(n, max))
	for {
		if len(b) == cap(b) && int64(cap(b)) < max {
			nb := make([]byte, len(b), min(2*int64(cap(b)), max))
			copy(nb, b)
			b = nb
		}
		if len(b) == cap(b) {
			return b, nil // max bytes read
		}
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// FormatSize formats a byte count for messages: "64 MiB", "1.5 GiB",
// "512 bytes".
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	suffix := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[exp]
	if n%div == 0 {
		return fmt.Sprintf("%d %s", n/div, suffix)
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
