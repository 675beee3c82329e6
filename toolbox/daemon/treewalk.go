package daemon

import (
	"encoding/json"
	"io"
	"net/http"
)

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
