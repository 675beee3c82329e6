// Package lockfile takes flock(2) locks that give up when a context ends.
// flock locks belong to an open file description, so two goroutines of one
// process, each with its own open file, exclude each other exactly as two
// processes do.
package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Lock takes how (unix.LOCK_EX or unix.LOCK_SH) on f, waiting until the
// holder lets go or ctx ends. flock cannot be interrupted by a context, so
// it tries without blocking and polls, backing off up to 20 ms.
func Lock(ctx context.Context, f *os.File, how int) error {
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for the lock of %s: %w", f.Name(), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// TryLock takes how on f without waiting; it reports false when another
// holder has a conflicting lock.
func TryLock(f *os.File, how int) (bool, error) {
	err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	}
	return false, fmt.Errorf("lock %s: %w", f.Name(), err)
}
