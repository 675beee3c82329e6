package daemon

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

func (e *testEnv) replace(req toolbox.ReplaceRequest) []toolbox.ReplaceResult {
	e.t.Helper()
	var out []toolbox.ReplaceResult
	if err := json.Unmarshal(e.expect(200, "POST", "/files/replace", req), &out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReplaceRewritesMatches(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a.txt": "v1 and v1\n", "sub/b.txt": "v1"})
	got := e.replace(toolbox.ReplaceRequest{Files: []string{"a.txt", filepath.Join(e.work, "sub/b.txt")}, Pattern: "v1", NewValue: "v22"})
	want := []toolbox.ReplaceResult{{File: "a.txt", Success: true}, {File: filepath.Join(e.work, "sub/b.txt"), Success: true}}
	if !slices.Equal(got, want) {
		t.Errorf("results %+v", got)
	}
	if a, b := readString(t, filepath.Join(e.work, "a.txt")), readString(t, filepath.Join(e.work, "sub/b.txt")); a != "v22 and v22\n" || b != "v22" {
		t.Errorf("contents %q %q", a, b)
	}
}

// The rewritten file keeps its mode and owner, and no temporary file is
// left beside it.
func TestReplaceKeepsModeAndOwner(t *testing.T) {
	e := newEnv(t, true)
	p := filepath.Join(e.work, "script.sh")
	writeTree(t, e.work, map[string]string{"script.sh": "echo old\n"})
	os.Chmod(p, 0o751)
	if os.Geteuid() == 0 {
		os.Chown(p, 1234, 5678)
	}
	before, _ := os.Stat(p)
	e.replace(toolbox.ReplaceRequest{Files: []string{"script.sh"}, Pattern: "old", NewValue: "new"})
	after, _ := os.Stat(p)
	if after.Mode() != before.Mode() {
		t.Errorf("mode %v, was %v", after.Mode(), before.Mode())
	}
	bs, as := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
	if as.Uid != bs.Uid || as.Gid != bs.Gid {
		t.Errorf("owner %d:%d, was %d:%d", as.Uid, as.Gid, bs.Uid, bs.Gid)
	}
	if as.Ino == bs.Ino {
		t.Errorf("the file was rewritten in place, not replaced by rename")
	}
	if entries, _ := os.ReadDir(e.work); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// A file without the pattern is not written: same inode, same mtime.
func TestReplaceLeavesUnmatchedFileAlone(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a.txt": "nothing to see\n"})
	p := filepath.Join(e.work, "a.txt")
	before, _ := os.Stat(p)
	dirBefore, _ := os.Stat(e.work)
	got := e.replace(toolbox.ReplaceRequest{Files: []string{"a.txt"}, Pattern: "absent", NewValue: "x"})
	after, _ := os.Stat(p)
	dirAfter, _ := os.Stat(e.work)
	if len(got) != 1 || !got[0].Success {
		t.Errorf("result %+v", got)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) || !dirAfter.ModTime().Equal(dirBefore.ModTime()) {
		t.Errorf("an unmatched file or its folder was touched")
	}
}

// A symbolic link is replaced through: its target changes, the link stays.
func TestReplaceThroughLink(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"real/target.txt": "old"})
	link := filepath.Join(e.work, "link.txt")
	os.Symlink("real/target.txt", link)
	e.replace(toolbox.ReplaceRequest{Files: []string{"link.txt"}, Pattern: "old", NewValue: "new"})
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is gone: %v %v", fi, err)
	}
	if got := readString(t, filepath.Join(e.work, "real/target.txt")); got != "new" {
		t.Errorf("target %q", got)
	}
}

// Files that cannot be rewritten get their own failed result; the others
// are still done.
func TestReplacePerFileErrors(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"ok.txt": "old", "dir/x": ""})
	got := e.replace(toolbox.ReplaceRequest{Files: []string{"missing.txt", "dir", "ok.txt"}, Pattern: "old", NewValue: "new"})
	if len(got) != 3 || got[0].Success || !strings.Contains(got[0].Error, "not found") ||
		got[1].Success || !strings.Contains(got[1].Error, "not a regular file") || !got[2].Success {
		t.Errorf("results %+v", got)
	}
	if readString(t, filepath.Join(e.work, "ok.txt")) != "new" {
		t.Error("ok.txt not rewritten")
	}
}

// Bad requests are refused whole: nothing on disk changes.
func TestReplaceBadInputChangesNothing(t *testing.T) {
	e := newErrEnv(t)
	writeTree(t, e.work, map[string]string{"a.txt": "old"})
	for _, req := range []toolbox.ReplaceRequest{
		{Files: []string{"a.txt"}, Pattern: "", NewValue: "x"},
		{Files: nil, Pattern: "old", NewValue: "x"},
		{Files: []string{"a.txt", "nul\x00"}, Pattern: "old", NewValue: "x"},
	} {
		e.expectError(400, codeBadRequest, "POST", "/files/replace", req)
	}
	e.expectError(400, codeInvalidRequestBody, "POST", "/files/replace", []byte(`{"files":"a.txt"}`), "Content-Type", "application/json")
	if got := readString(t, filepath.Join(e.work, "a.txt")); got != "old" {
		t.Errorf("a.txt changed: %q", got)
	}
}

// replaceStream gives what bytes.ReplaceAll gives, whatever the length of
// the input and wherever occurrences fall relative to its reads.
func TestReplaceStreamMatchesReplaceAll(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 45; i++ {
		old := []byte(strings.Repeat("ab", 1+r.IntN(3)))[:1+r.IntN(5)]
		repl := []byte(strings.Repeat("Z", r.IntN(4)))
		// Lengths around one and two reads, where occurrences straddle them.
		n := r.IntN(64)
		if i%3 > 0 {
			n += (i%3)*replaceChunk - 32
		}
		// A random block of a length prime to the read size, repeated.
		block := make([]byte, 4093)
		for j := range block {
			block[j] = "abc"[r.IntN(3)]
		}
		src := bytes.Repeat(block, n/len(block)+1)[:n]
		var dst bytes.Buffer
		if err := replaceStream(&dst, bytes.NewReader(src), old, repl); err != nil {
			t.Fatal(err)
		}
		if want := bytes.ReplaceAll(src, old, repl); !bytes.Equal(dst.Bytes(), want) {
			t.Fatalf("case %d (len %d, %q → %q): differs from bytes.ReplaceAll", i, n, old, repl)
		}
		found, err := containsStream(bytes.NewReader(src), old)
		if err != nil || found != bytes.Contains(src, old) {
			t.Fatalf("case %d: containsStream %v %v", i, found, err)
		}
	}
}
