package server

import (
	"fmt"
	"net/http"
	"sync"
)

// A buildLog is the output of one image build, kept while the server
// knows its sandbox or snapshot: written by the build, read (and
// followed) by any number of clients. Only its last maxBuildLog bytes are
// kept (a `RUN yes` does not exhaust the server); readers of what was
// dropped read a line saying so. The zero value is an empty log being
// written.
type buildLog struct {
	mu   sync.Mutex
	data []byte
	// base is the offset in the whole log of data[0]: the bytes
	// dropped.
	base    int
	done    bool
	changed chan struct{} // closed at the next write or close
}

// maxBuildLog bounds the part of a build log the server keeps.
const maxBuildLog = 1 << 20

// Write appends p to the log, dropping its start past maxBuildLog. The
// log's memory stays within about 2×maxBuildLog however large p is: a
// write larger than the bound keeps its end only, and the start is
// dropped in place (readers get copies), in steps of a quarter, so that
// a log written byte by byte is not moved at every write.
func (l *buildLog) Write(p []byte) (int, error) {
	n := len(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if drop := len(p) - maxBuildLog; drop > 0 {
		l.base += len(l.data) + drop
		l.data, p = l.data[:0], p[drop:]
	}
	if over := len(l.data) + len(p) - maxBuildLog; over > 0 {
		over = min(max(over, maxBuildLog/4), len(l.data))
		l.data = l.data[:copy(l.data, l.data[over:])]
		l.base += over
	}
	l.data = append(l.data, p...)
	l.notify()
	return n, nil
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

// read returns the log from byte off of the whole log, the offset after
// it, whether the log is complete, and a channel closed when there is
// more to read. A chunk from a dropped part starts with a line saying
// how much was dropped.
func (l *buildLog) read(off int) (chunk []byte, next int, done bool, more <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	if off < l.base {
		chunk = fmt.Appendf(nil, "(agentbox serve: %d bytes of the build log were dropped: the server keeps its last %d)\n", l.base-off, maxBuildLog)
		off = l.base
	}
	return append(chunk, l.data[off-l.base:]...), l.base + len(l.data), l.done, l.changed
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
		chunk, next, done, more := l.read(off)
		if len(chunk) > 0 {
			if _, err := w.Write(chunk); err != nil {
				return nil // the client went away
			}
		}
		off = next
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
