//go:build linux

package tools_test

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
)

// allocated returns the bytes the test process (the host side) allocated
// while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestEditFileTooLarge: edit_file on a 40 GiB sparse file (issue 24) is
// refused from the file's size, before reading it, with a tool error
// naming the size and the limit; an endless device, whose size says 0, is
// refused once the limit was read.
func TestEditFileTooLarge(t *testing.T) {
	s := newSet(t, tools.Config{})
	mustCall(t, s, tools.NameExecute, obj{"command": "printf 'needle\\n' > big && truncate -s 40G big"})
	var r *tools.Result
	n := allocated(func() {
		r = call(t, s, tools.NameEditFile, obj{"path": "big", "old_string": "needle", "new_string": "pin"}, nil)
	})
	if !errors.Is(r.Err, sandbox.ErrInvalidArgument) || !errors.Is(r.Err, workspace.ErrTooLarge) {
		t.Fatalf("edit_file of a 40 GiB file: %v; want an invalid-argument error matching ErrTooLarge", r.Err)
	}
	for _, want := range []string{"/tmp/w/big", "40 GiB", strconv.Itoa(40 << 30), "16 MiB", "execute_command"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("the error lacks %q: %s", want, r.Text)
		}
	}
	if n > 8<<20 {
		t.Errorf("refusing a 40 GiB file allocated %d bytes on the host", n)
	}

	const limit = 1 << 20
	s = newSet(t, tools.Config{MaxEditFileBytes: limit})
	n = allocated(func() {
		r = call(t, s, tools.NameEditFile, obj{"path": "/dev/zero", "old_string": "a", "new_string": "b"}, nil)
	})
	if !errors.Is(r.Err, workspace.ErrTooLarge) || !strings.Contains(r.Text, "grew past") || !strings.Contains(r.Text, "1 MiB") {
		t.Fatalf("edit_file of /dev/zero with a 1 MiB limit: %v", r.Err)
	}
	if n > 16*limit {
		t.Errorf("reading /dev/zero up to %d bytes allocated %d bytes", limit, n)
	}
}

// TestReadFileHugeIsPartial: read_file of a 40 GiB sparse file that starts
// with text reads at most Config.MaxReadFileBytes of it: the lines asked
// for come back, with the news that the file is larger and its line count
// a lower bound.
func TestReadFileHugeIsPartial(t *testing.T) {
	const scan = 4 << 20
	s := newSet(t, tools.Config{MaxReadFileBytes: scan})
	mustCall(t, s, tools.NameExecute, obj{"command": "seq 1 5000 > big && truncate -s 40G big"})
	var r *tools.Result
	n := allocated(func() { r = mustCall(t, s, tools.NameReadFile, obj{"path": "big", "offset": 4990, "limit": 5}) })
	out := r.Data.(*tools.ReadFileOutput)
	if out.Content != "4990\n4991\n4992\n4993\n4994\n" || !out.Partial || out.ReadBytes != scan || out.TotalLines != 5001 {
		t.Fatalf("read_file of a 40 GiB file: %+v", out)
	}
	if !strings.Contains(r.Text, "larger than the 4 MiB read_file reads") || !strings.Contains(r.Text, "offset 4995") {
		t.Errorf("the text does not say the file was read in part:\n%s", r.Text)
	}
	if n > 4*scan {
		t.Errorf("read_file allocated %d bytes on the host", n)
	}
	r = mustCall(t, s, tools.NameReadFile, obj{"path": "big", "offset": 6000})
	if out := r.Data.(*tools.ReadFileOutput); !out.Partial || out.Content != "" || !strings.Contains(r.Text, "sed -n '6000,6099p' /tmp/w/big") {
		t.Errorf("read_file past what it reads: %+v\n%s", out, r.Text)
	}
	// A file of exactly the limit is whole.
	mustCall(t, s, tools.NameExecute, obj{"command": "head -c " + strconv.Itoa(scan-1) + " /dev/zero | tr '\\0' a > exact && echo >> exact"})
	if out := mustCall(t, s, tools.NameReadFile, obj{"path": "exact"}).Data.(*tools.ReadFileOutput); out.Partial || out.TotalLines != 1 {
		t.Errorf("read_file of a file of exactly MaxReadFileBytes: %+v", out)
	}
}

// TestFindFilesTooMany: find_files whose results are larger than the
// toolbox client reads (toolbox.MaxJSONBytes, 64 MiB: here about 100 MB
// of matches) is a tool error saying to narrow the search, not a decoded
// list of them all.
func TestFindFilesTooMany(t *testing.T) {
	s := newSet(t, tools.Config{})
	mustCall(t, s, tools.NameExecute, obj{"command": "mkdir -p d && yes x | head -n 2000000 > d/many"})
	var r *tools.Result
	n := allocated(func() { r = call(t, s, tools.NameFindFiles, obj{"path": "d", "text": "x"}, nil) })
	if !errors.Is(r.Err, sandbox.ErrInvalidArgument) || !errors.Is(r.Err, workspace.ErrTooLarge) || !strings.Contains(r.Text, "narrow it") || !strings.Contains(r.Text, "64 MiB") {
		t.Fatalf("find_files with about 100 MB of results: %v\n%s", r.Err, r.Text)
	}
	if n > 256<<20 {
		t.Errorf("find_files allocated %d bytes on the host", n)
	}
}
