package server

import (
	"net/http"
	"sync"
)

// A buildLog is the output of one image build, kept while the server
// knows its sandbox or snapshot: written by the build, read (and
// followed) by any number of clients. The zero value is an empty log
// being written.
type buildLog struct {
	mu      sync.Mutex
	data    []byte
	done    bool
	changed chan struct{} // closed at the next write or close
}

// Write appends p to the log.
func (l *buildLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append(l.data, p...)
	l.notify()
	return len(p), nil
}

// close marks the log complete: followers get its end.
func (l *buildLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	l.notify()
}

// notify wakes the readers waiting on changed. Called with l.mu held.
func (l *buildLog) notify() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// read returns the log from byte off, whether it is complete, and a
// channel closed when there is more to read.
func (l *buildLog) read(off int) (chunk []byte, done bool, more <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return append([]byte(nil), l.data[off:]...), l.done, l.changed
}

// serveBuildLog answers r with the log as plain text: all of it so far,
// and with ?follow=true what comes next too, flushed as it comes, until
// the build ends (Daytona's build-logs endpoints, which the SDKs read
// with fetch, chunk by chunk).
func serveBuildLog(w http.ResponseWriter, r *http.Request, l *buildLog) error {
	follow := false
	if f := r.URL.Query().Get("follow"); f != "" {
		var err error
		if follow, err = parseBool("follow", f); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	rc := http.NewResponseController(w)
	off := 0
	for {
		chunk, done, more := l.read(off)
		if len(chunk) > 0 {
			if _, err := w.Write(chunk); err != nil {
				return nil // the client went away
			}
			off += len(chunk)
		}
		if done || !follow {
			return nil
		}
		_ = rc.Flush()
		select {
		case <-more:
		case <-r.Context().Done():
			return nil
		}
	}
}
