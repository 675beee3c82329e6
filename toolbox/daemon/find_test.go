package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// writeTree creates files (path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *testEnv) find(path, pattern string) []toolbox.Match {
	e.t.Helper()
	var ms []toolbox.Match
	data := e.expect(200, "GET", "/files/find?path="+urlQuery(path)+"&pattern="+urlQuery(pattern), nil)
	if err := json.Unmarshal(data, &ms); err != nil {
		e.t.Fatalf("find answer %s: %v", data, err)
	}
	return ms
}

func (e *testEnv) search(path, pattern string) []string {
	e.t.Helper()
	var r toolbox.SearchFilesResponse
	data := e.expect(200, "GET", "/files/search?path="+urlQuery(path)+"&pattern="+urlQuery(pattern), nil)
	if err := json.Unmarshal(data, &r); err != nil || r.Files == nil {
		e.t.Fatalf("search answer %s: %v", data, err)
	}
	return r.Files
}

func TestFindReturnsMatchingLines(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{
		"a.txt":         "one TODO\ntwo\nthree TODO: x\r\n",
		"sub/b.go":      "// TODO",
		"sub/none.txt":  "nothing here\n",
		"bin/blob.bin":  "TODO\x00binary",
		"sub/deep/c.md": "\n\nTODO last line without newline",
	})
	got := e.find(e.work, "TODO") // absolute in, absolute out
	want := []toolbox.Match{
		{File: filepath.Join(e.work, "a.txt"), Line: 1, Content: "one TODO"},
		{File: filepath.Join(e.work, "a.txt"), Line: 3, Content: "three TODO: x"},
		{File: filepath.Join(e.work, "sub/b.go"), Line: 1, Content: "// TODO"},
		{File: filepath.Join(e.work, "sub/deep/c.md"), Line: 3, Content: "TODO last line without newline"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("find:\ngot  %+v\nwant %+v", got, want)
	}
}

func TestFindInOneFile(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a.txt": "x\ny\nx\n", "b.txt": "x\n"})
	got := e.find(filepath.Join(e.work, "a.txt"), "x")
	if len(got) != 2 || got[0].Line != 1 || got[1].Line != 3 || got[0].File != filepath.Join(e.work, "a.txt") {
		t.Errorf("find in a file: %+v", got)
	}
}

func TestFindNoMatchIsEmptyList(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a.txt": "x\n"})
	if data := e.expect(200, "GET", "/files/find?path=.&pattern=nowhere", nil); strings.TrimSpace(string(data)) != "[]" {
		t.Errorf("no match: %s", data)
	}
}

// A line longer than the read buffer is searched to its end; its content
// is cut at maxMatchContent.
func TestFindLongLine(t *testing.T) {
	e := newEnv(t, true)
	long := strings.Repeat("a", 200<<10) + "NEEDLE" + strings.Repeat("b", 10)
	writeTree(t, e.work, map[string]string{"long.txt": "first\n" + long + "\nNEEDLE after\n"})
	got := e.find("long.txt", "NEEDLE")
	if len(got) != 2 || got[0].Line != 2 || got[1].Line != 3 || got[1].Content != "NEEDLE after" {
		t.Fatalf("matches %d: %+v", len(got), got[min(len(got), 1):])
	}
	if len(got[0].Content) != maxMatchContent || got[0].Content != long[:maxMatchContent] {
		t.Errorf("long line content: %d bytes", len(got[0].Content))
	}
}

// A pattern split by the boundary of two reads is found.
func TestFindAcrossReadBoundary(t *testing.T) {
	e := newEnv(t, true)
	for _, off := range []int{3, 2, 1} {
		line := strings.Repeat("a", 64<<10-off) + "NEEDLE\n"
		name := fmt.Sprintf("f%d.txt", off)
		writeTree(t, e.work, map[string]string{name: line})
		if got := e.find(name, "NEEDLE"); len(got) != 1 || got[0].Line != 1 {
			t.Errorf("offset %d: %+v", off, len(got))
		}
	}
}

// Symbolic links are not followed: a linked folder outside the searched
// tree is not searched.
func TestFindDoesNotFollowLinks(t *testing.T) {
	e := newEnv(t, true)
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "NEEDLE\n"})
	os.Symlink(outside, filepath.Join(e.work, "link"))
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(e.work, "file-link"))
	if got := e.find(".", "NEEDLE"); len(got) != 0 {
		t.Errorf("followed a link: %+v", got)
	}
	if got := e.search(".", "*"); len(got) != 2 {
		t.Errorf("search lists the links themselves: %q", got)
	}
}

func TestFindBadInput(t *testing.T) {
	e := newErrEnv(t)
	writeTree(t, e.work, map[string]string{"a.txt": "x\n"})
	e.expectError(400, codeBadRequest, "GET", "/files/find?path=.&pattern=", nil)
	e.expectError(400, codeBadRequest, "GET", "/files/find?path=.", nil)
	e.expectError(400, codeBadRequest, "GET", "/files/find?path=.&pattern=a%0Ab", nil)
	e.expectError(400, codeBadRequest, "GET", "/files/find?pattern=x", nil)
	e.expectError(404, codeFileNotFound, "GET", "/files/find?path=../x&pattern=x", nil) // resolves from the work dir
	e.expectError(404, codeFileNotFound, "GET", "/files/find?path=nope&pattern=x", nil)
}

func TestSearchByName(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a.go": "", "src/b.go": "", "src/c.txt": "", "src/x.go/d": ""})
	got := e.search(e.work, "*.go")
	want := []string{filepath.Join(e.work, "a.go"), filepath.Join(e.work, "src/b.go"), filepath.Join(e.work, "src/x.go")}
	if !slices.Equal(got, want) {
		t.Errorf("search *.go:\ngot  %q\nwant %q", got, want)
	}
}

func TestSearchByPath(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{
		"file1.txt": "", "file2.go": "", "src/main.go": "", "src/utils.go": "",
		"src/components/button.tsx": "", "src/components/accordion.tsx": "", "docs/readme.md": "",
	})
	rel := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			r, _ := filepath.Rel(e.work, p)
			out = append(out, r)
		}
		return out
	}
	for pattern, want := range map[string][]string{
		"**/*.tsx":        {"src/components/accordion.tsx", "src/components/button.tsx"},
		"src/**/*.go":     {"src/main.go", "src/utils.go"},
		"**/*.{go,tsx}":   {"file2.go", "src/components/accordion.tsx", "src/components/button.tsx", "src/main.go", "src/utils.go"},
		"./docs/*":        {"docs/readme.md"},
		"src/*/button.ts": nil,
		"file?.txt":       {"file1.txt"},
	} {
		if got := rel(e.search(e.work, pattern)); !slices.Equal(got, want) {
			t.Errorf("search %q: got %q, want %q", pattern, got, want)
		}
	}
}

func TestSearchBadInput(t *testing.T) {
	e := newErrEnv(t)
	writeTree(t, e.work, map[string]string{"a.txt": ""})
	for _, p := range []string{"", "[", "a/[b", "{a,b", `x\`} {
		e.expectError(400, codeBadRequest, "GET", "/files/search?path=.&pattern="+urlQuery(p), nil)
	}
	e.expectError(400, codeBadRequest, "GET", "/files/search?path=a.txt&pattern=*", nil)
	e.expectError(404, codeFileNotFound, "GET", "/files/search?path=nope&pattern=*", nil)
}

// A searched path that is a link to a folder is searched as that folder
// (what is below it is still not followed).
func TestFindAndSearchThroughLinkedRoot(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"real/a.txt": "NEEDLE\n"})
	os.Symlink("real", filepath.Join(e.work, "link"))
	if got := e.find(filepath.Join(e.work, "link"), "NEEDLE"); len(got) != 1 || got[0].File != filepath.Join(e.work, "link/a.txt") {
		t.Errorf("find through a linked root: %+v", got)
	}
	if got := e.search(filepath.Join(e.work, "link"), "*.txt"); !slices.Equal(got, []string{filepath.Join(e.work, "link/a.txt")}) {
		t.Errorf("search through a linked root: %q", got)
	}
}
