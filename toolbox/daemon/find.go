package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// maxMatchContent is how much of a matching line GET /files/find returns:
// a longer line is still searched to its end, its content is cut there.
const maxMatchContent = 64 << 10

// binarySniff is how many leading bytes decide that a file is binary (it
// holds a NUL byte among them), as Daytona's daemon decides.
const binarySniff = 512

// handleFind is GET /files/find: every line of the regular files under
// path (or of path itself) that contains pattern, a literal string; each
// file named in the caller's form (echoPath).
func (s *Server) handleFind(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query().Get("path")
	root, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	pattern := r.URL.Query().Get("pattern")
	switch {
	case pattern == "":
		return badRequest("query parameter \"pattern\" is required: the text to look for")
	case strings.ContainsAny(pattern, "\n\r"):
		return badRequest("pattern %q contains a line break; matches are single lines, so look for one line at a time", pattern)
	}
	if _, err := s.root.stat(root); err != nil {
		return fsError(root, err)
	}
	out := newJSONList(w, "[", "]")
	pat := []byte(pattern)
	err = s.root.walk(r.Context(), root, walkOptions{skipPseudo: true}, func(e walkEntry) error {
		if !e.info.Mode().IsRegular() {
			return nil
		}
		f, err := e.open()
		if err != nil {
			return nil // unreadable: skipped, as Daytona's daemon skips it
		}
		defer f.Close()
		return findInFile(f, pat, func(line int, content []byte) error {
			return out.add(toolbox.Match{File: echoPath(q, root, e.path), Line: line, Content: string(content)})
		})
	})
	if err != nil && !out.started() {
		return err
	}
	out.end()
	return nil
}

// findInFile calls emit for each line of the file f that contains pat,
// reading it through a fixed buffer. Binary files are skipped, as
// Daytona's daemon skips them.
func findInFile(f io.Reader, pat []byte, emit func(line int, content []byte) error) error {
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniff); bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	var (
		content []byte // the line so far, up to maxMatchContent
		tail    []byte // the last len(pat)-1 bytes of the line so far
		matched bool
		line    = 1
	)
	for {
		chunk, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) && !errors.Is(err, io.EOF) {
			return nil // unreadable from here on: what was found stands
		}
		end := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		data := bytes.TrimSuffix(chunk, []byte("\n"))
		if !matched {
			if len(tail) == 0 {
				matched = bytes.Contains(data, pat)
			} else {
				matched = bytes.Contains(append(tail, data...), pat)
			}
			tail = lastBytes(tail, data, len(pat)-1)
		}
		if room := maxMatchContent - len(content); room > 0 {
			content = append(content, data[:min(room, len(data))]...)
		}
		if end || (errors.Is(err, io.EOF) && len(chunk) > 0) {
			if matched {
				if err := emit(line, bytes.TrimSuffix(content, []byte("\r"))); err != nil {
					return err
				}
			}
			content, tail, matched = content[:0], tail[:0], false
			line++
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// lastBytes returns the last n bytes of prev followed by data, reusing
// prev's storage.
func lastBytes(prev, data []byte, n int) []byte {
	if n <= 0 {
		return prev[:0]
	}
	if len(data) >= n {
		return append(prev[:0], data[len(data)-n:]...)
	}
	keep := min(len(prev), n-len(data))
	out := append(prev[:0], prev[len(prev)-keep:]...)
	return append(out, data...)
}
