package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

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
	// flock cannot be interrupted by a context: try without blocking and
	// poll, backing off, until the holder lets go or ctx ends.
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// tryLockFile takes how on path without waiting; ok is false when another
// holder has a conflicting lock.
func tryLockFile(path string, how int) (l *fileLock, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("open lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return &fileLock{f: f}, true, nil
}

// unlock releases the lock (closing the file releases it).
func (l *fileLock) unlock() {
	if l != nil {
		l.f.Close()
	}
}
