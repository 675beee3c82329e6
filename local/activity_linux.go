package local

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// activity tracks the use of the toolbox API: in memory for the auto-stop,
// and for host processes (Info.LastUsedAt) as the mtime of a stamp file in
// the state folder, written at most about once a second and never more
// than a second behind.
type activity struct {
	last     atomic.Int64 // unix nanoseconds of the last request start or end
	inflight atomic.Int64 // requests being served
	stamped  atomic.Int64 // the stamp's mtime, unix nanoseconds
	pending  atomic.Bool  // a delayed stamp is scheduled
	mu       sync.Mutex   // orders the stamp's writes
	// path is the stamp's /proc/self/fd link: the stamp is kept open
	// for the init's life (the sandbox may replace its path) and changed
	// through it; "" without a stamp.
	path string
	f    *os.File // the stamp the init opened itself, kept from the GC
}

// newActivity opens the stamp file at path, which it creates unless
// exists (path then is the /proc/self/fd link of the host's stamp, see
// activityPath), and marks now as the last use. Without a stamp (e.g. the
// folder is full) only the auto-stop works.
func newActivity(path string, exists bool) *activity {
	a := &activity{}
	if exists {
		a.path = path
	} else if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644); err == nil {
		a.f, a.path = f, "/proc/self/fd/"+strconv.Itoa(int(f.Fd()))
	}
	now := time.Now().UnixNano()
	a.last.Store(now)
	a.stamp(now)
	return a
}

func (a *activity) begin() {
	a.inflight.Add(1)
	a.touch()
}

func (a *activity) end() {
	a.touch()
	a.inflight.Add(-1)
}

// touch marks now as the last use. It writes the stamp when it is a second
// old, else schedules the write a second later.
func (a *activity) touch() {
	now := time.Now().UnixNano()
	a.last.Store(now)
	if now-a.stamped.Load() >= int64(time.Second) {
		a.stamp(now)
		return
	}
	if a.pending.CompareAndSwap(false, true) {
		time.AfterFunc(time.Second, func() {
			a.pending.Store(false)
			a.stamp(a.last.Load())
		})
	}
}

// refresh stamps now while a request is being served (a long command or a
// log follow keeps the sandbox in use).
func (a *activity) refresh() {
	if a.inflight.Load() > 0 {
		a.stamp(time.Now().UnixNano())
	}
}

// idleFor reports whether no request ran for d.
func (a *activity) idleFor(d time.Duration) bool {
	return a.inflight.Load() == 0 && time.Since(time.Unix(0, a.last.Load())) >= d
}

// stamp sets the stamp's mtime to t (unix nanoseconds) unless it is newer.
func (a *activity) stamp(t int64) {
	if a.path == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t <= a.stamped.Load() {
		return
	}
	a.stamped.Store(t)
	ts := unix.NsecToTimespec(t)
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, a.path, []unix.Timespec{ts, ts}, 0)
}
