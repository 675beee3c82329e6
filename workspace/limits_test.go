//go:build linux

package workspace_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/agentbox-dev/agentbox/workspace"
)

// allocated returns the bytes the test process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestReadFileBounded: the host decides how much of a sandbox's file it
// holds. A 40 GiB sparse file is refused from its size, before it is read;
// an endless device (whose size says 0) is refused once the limit was
// read; a file of exactly the limit is read whole.
func TestReadFileBounded(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.New(workspace.Config{Sandbox: newSandbox(t), WorkingDirectory: "/tmp/w"})
	if err != nil {
		t.Fatal(err)
	}
	const huge = 40 << 30
	if r, err := ws.ExecuteCommand(ctx, "truncate -s 40G big && printf 0123456789 > ten", nil, nil); err != nil || r.ExitCode != 0 {
		t.Fatalf("making the files: %+v, %v", r, err)
	}

	var data []byte
	n := allocated(func() { data, err = ws.ReadFile(ctx, "big") })
	var tl *workspace.FileTooLargeError
	if !errors.Is(err, workspace.ErrTooLarge) || !errors.As(err, &tl) || tl.Size != huge || tl.Limit != workspace.DefaultMaxReadFileBytes || tl.Path != "/tmp/w/big" {
		t.Fatalf("ReadFile of a 40 GiB file: %d bytes, %v; want a FileTooLargeError with its size and the limit", len(data), err)
	}
	if n > 8<<20 {
		t.Errorf("refusing a 40 GiB file allocated %d bytes", n)
	}

	const limit = 1 << 20
	n = allocated(func() { data, err = ws.ReadFileLimit(ctx, "/dev/zero", limit) })
	if !errors.As(err, &tl) || tl.Size != -1 || tl.Limit != limit {
		t.Fatalf("ReadFileLimit of /dev/zero: %d bytes, %v; want a FileTooLargeError that it grew past the limit", len(data), err)
	}
	if n > 16*limit {
		t.Errorf("reading /dev/zero up to %d bytes allocated %d bytes", limit, n)
	}

	if data, err = ws.ReadFileLimit(ctx, "ten", 10); err != nil || string(data) != "0123456789" {
		t.Fatalf("ReadFileLimit of a file of exactly the limit = %q, %v", data, err)
	}
	if _, err = ws.ReadFileLimit(ctx, "ten", 9); !errors.As(err, &tl) || tl.Size != 10 {
		t.Fatalf("ReadFileLimit of 10 bytes with limit 9: %v", err)
	}
}
