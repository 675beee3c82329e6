package image

import (
	"context"
	"fmt"
	"os"

	"github.com/agentbox-dev/agentbox/internal/lockfile"

	"golang.org/x/sys/unix"
)

// A fileLock is a flock(2) lock on a file of the store. flock locks belong
// to an open file description, so two goroutines of one process exclude
// each other exactly as two processes do.
type fileLock struct{ f *os.File }

// lockFile takes how (unix.LOCK_EX or unix.LOCK_SH) on path, creating the
// file, and waits for it until ctx is done.
func lockFile(ctx context.Context, path string, how int) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := lockfile.Lock(ctx, f, how); err != nil {
		f.Close()
		return nil, err
	}
	return &fileLock{f: f}, nil
}

// tryLockFile takes how on path without waiting; ok is false when another
// holder has a conflicting lock.
func tryLockFile(path string, how int) (l *fileLock, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("open lock: %w", err)
	}
	if ok, err = lockfile.TryLock(f, how); !ok {
		f.Close()
		return nil, false, err
	}
	return &fileLock{f: f}, true, nil
}

// unlock releases the lock (closing the file releases it).
func (l *fileLock) unlock() {
	if l != nil {
		l.f.Close()
	}
}
