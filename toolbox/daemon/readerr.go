package daemon

import "io"

// readErr is a reader that keeps the error of its reader, other than
// io.EOF: what tells a file's failure from the client's.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
