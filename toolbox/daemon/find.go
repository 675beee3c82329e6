package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// maxMatchContent is how much of a matching line GET /files/find returns:
// a longer line is still searched to its end, its content is cut there.
const maxMatchContent = 64 << 10

// binarySniff is how many leading bytes decide that a file is binary (it
// holds a NUL byte among them), as Daytona's daemon decides.
const binarySniff = 512

// maxGlobAlternatives bounds the patterns one brace expression expands to.
const maxGlobAlternatives = 256

// handleFind is GET /files/find: every line of the regular files under
// path (or of path itself) that contains pattern, a literal string.
func (s *Server) handleFind(w http.ResponseWriter, r *http.Request) error {
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
	if _, err := os.Stat(root); err != nil {
		return fsError(root, err)
	}
	out := newJSONList(w, "[", "]")
	pat := []byte(pattern)
	err = walkTree(r.Context(), root, func(p string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		return findInFile(p, pat, func(line int, content []byte) error {
			return out.add(toolbox.Match{File: p, Line: line, Content: string(content)})
		})
	})
	if err != nil && !out.started() {
		return err
	}
	out.end()
	return nil
}

// findInFile calls emit for each line of the file at p that contains pat,
// reading it through a fixed buffer. Binary and unreadable files are
// skipped, as Daytona's daemon skips them.
func findInFile(p string, pat []byte, emit func(line int, content []byte) error) error {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
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

// handleSearch is GET /files/search: the files and folders under path
// whose name (for a pattern without a slash) or path relative to path
// (for a pattern with one) matches a glob pattern.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) error {
	root, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	g, err := compileGlob(r.URL.Query().Get("pattern"))
	if err != nil {
		return err
	}
	if fi, err := os.Stat(root); err != nil {
		return fsError(root, err)
	} else if !fi.IsDir() {
		return badRequest("%q is not a directory; search looks for names inside a directory", root)
	}
	out := newJSONList(w, `{"files":[`, "]}")
	err = walkTree(r.Context(), root, func(p string, d fs.DirEntry) error {
		rel, err := filepath.Rel(root, p)
		if err != nil || !g.match(filepath.ToSlash(rel)) {
			return nil
		}
		return out.add(p)
	})
	if err != nil && !out.started() {
		return err
	}
	out.end()
	return nil
}

// walkTree calls fn for every entry below root (or for root, when it is
// not a folder) in
// lexical order, without following symbolic links and without descending
// into pseudo file systems (/proc, /sys …) met on the way; unreadable
// folders are skipped. It stops when ctx is done or fn fails.
func walkTree(ctx context.Context, root string, fn func(p string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return fsError(root, err)
			}
			return nil // an unreadable folder: skip it
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if p == root && d.IsDir() {
			return nil
		}
		if p != root && d.IsDir() && isPseudoFS(p) {
			return filepath.SkipDir
		}
		return fn(p, d)
	})
}

// jsonList streams a JSON list as its items come: the answer's status
// and opening are written with the first item (or by end), so a handler
// may still fail with an error answer before that.
type jsonList struct {
	w           http.ResponseWriter
	open, close string
	n           int
	wrote       bool
}

func newJSONList(w http.ResponseWriter, open, close string) *jsonList {
	return &jsonList{w: w, open: open, close: close}
}

func (l *jsonList) started() bool { return l.wrote }

func (l *jsonList) start() {
	if !l.wrote {
		l.wrote = true
		l.w.Header().Set("Content-Type", "application/json; charset=utf-8")
		l.w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(l.w, l.open)
	}
}

// add appends v; it fails once writing to the client fails.
func (l *jsonList) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	l.start()
	if l.n > 0 {
		b = append([]byte{','}, b...)
	}
	l.n++
	if _, err := l.w.Write(b); err != nil {
		return err
	}
	return nil
}

// end closes the list.
func (l *jsonList) end() {
	l.start()
	_, _ = io.WriteString(l.w, l.close)
}

// glob is a compiled GET /files/search pattern: path.Match syntax, plus
// {a,b} alternatives and, in a pattern with a slash, ** for any number of
// folders.
type glob struct {
	byName bool       // no slash: match the base name at any depth
	alts   [][]string // each alternative, split at slashes
}

func compileGlob(pattern string) (*glob, error) {
	if pattern == "" {
		return nil, badRequest("query parameter \"pattern\" is required: a glob such as *.go or src/**/*.ts")
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, badRequest("pattern %q contains a NUL byte", pattern)
	}
	alts, err := expandBraces(pattern)
	if err != nil {
		return nil, badRequest("invalid glob pattern %q: %v", pattern, err)
	}
	g := &glob{byName: !strings.Contains(pattern, "/")}
	for _, a := range alts {
		segs := strings.Split(strings.TrimPrefix(a, "./"), "/")
		for _, seg := range segs {
			if seg == "**" {
				continue
			}
			if _, err := path.Match(seg, ""); err != nil {
				return nil, badRequest("invalid glob pattern %q: %v in %q (escape a literal [ or \\ with \\)", pattern, err, seg)
			}
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// match reports whether rel, a slash-separated path below the search
// root, matches.
func (g *glob) match(rel string) bool {
	if g.byName {
		name := path.Base(rel)
		for _, a := range g.alts {
			if ok, _ := path.Match(a[0], name); ok {
				return true
			}
		}
		return false
	}
	parts := strings.Split(rel, "/")
	for _, a := range g.alts {
		if matchSegments(a, parts) {
			return true
		}
	}
	return false
}

// matchSegments matches path segments against pattern segments, where
// "**" stands for zero or more segments.
func matchSegments(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(parts); i++ {
				if matchSegments(pat[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], parts[0]); !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return len(parts) == 0
}

// expandBraces expands {a,b} alternatives (nested ones too) into the
// patterns they stand for. A backslash escapes the next character.
func expandBraces(p string) ([]string, error) {
	open := -1
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			i++
			continue
		}
		if p[i] == '{' {
			open = i
			break
		}
	}
	if open < 0 {
		return []string{p}, nil
	}
	depth, start := 0, open+1
	var choices []string
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			depth++
		case ',':
			if depth == 1 {
				choices = append(choices, p[start:i])
				start = i + 1
			}
		case '}':
			depth--
			if depth == 0 {
				choices = append(choices, p[start:i])
				var out []string
				for _, c := range choices {
					more, err := expandBraces(p[:open] + c + p[i+1:])
					if err != nil {
						return nil, err
					}
					out = append(out, more...)
					if len(out) > maxGlobAlternatives {
						return nil, errors.New("more than 256 alternatives")
					}
				}
				return out, nil
			}
		}
	}
	return nil, errors.New("a { has no matching }")
}
