package lockfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func open(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A second holder waits for the first, gives up when its context ends, and
// gets the lock once the first lets go.
func TestLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	a, b := open(t, p), open(t, p)
	if err := Lock(context.Background(), a, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if ok, err := TryLock(b, unix.LOCK_SH); ok || err != nil {
		t.Fatalf("TryLock while held = %v, %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := Lock(ctx, b, unix.LOCK_EX); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while held = %v, want the context's end", err)
	}
	got := make(chan error, 1)
	go func() { got <- Lock(context.Background(), b, unix.LOCK_EX) }()
	a.Close()
	if err := <-got; err != nil {
		t.Fatalf("Lock after the holder let go = %v", err)
	}
}
