package daemon

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// walkTree calls fn for every entry below root (or for root, when it is
// not a folder) in lexical order, without following symbolic links below
// root (root itself may be one) and without descending into pseudo file
// systems (/proc, /sys …) met on the way; unreadable folders are skipped.
// It stops when ctx is done or fn fails.
func walkTree(ctx context.Context, root string, fn func(p string, d fs.DirEntry) error) error {
	start := root
	if fi, err := os.Stat(root); err == nil && fi.IsDir() && !strings.HasSuffix(root, "/") {
		start += "/" // a link to a folder is walked as the folder
	}
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return fsError(root, err)
			}
			return nil // an unreadable folder: skip it
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if p == start && d.IsDir() {
			return nil
		}
		if p != start && d.IsDir() && isPseudoFS(p) {
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
