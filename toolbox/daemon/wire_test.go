package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Answers that match Daytona's daemon where an SDK user notices (issue 27),
// in both modes, every exchange checked against the spec.

// bothModes runs f against a server in the normal and in the Daytona mode.
func bothModes(t *testing.T, f func(t *testing.T, daytona bool)) {
	for _, daytona := range []bool{false, true} {
		name := "normal"
		if daytona {
			name = "daytona"
		}
		t.Run(name, func(t *testing.T) { f(t, daytona) })
	}
}

// File info gives owner and group as numeric ids, and modifiedAt with its
// sub-second part (RFC 3339, as Go's time.Time in JSON), as Daytona does.
func TestFileInfoNumericIDsAndNanos(t *testing.T) {
	bothModes(t, func(t *testing.T, daytona bool) {
		e := newEnv(t, true, func(o *Options) { o.Daytona = daytona })
		writeTree(t, e.work, map[string]string{"f.txt": "x"})
		mt := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)
		if err := os.Chtimes(filepath.Join(e.work, "f.txt"), mt, mt); err != nil {
			t.Fatal(err)
		}
		var fi toolbox.FileInfo
		if err := json.Unmarshal(e.expect(200, "GET", "/files/info?path=f.txt", nil), &fi); err != nil {
			t.Fatal(err)
		}
		uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
		if fi.Owner != uid || fi.Group != gid {
			t.Errorf("owner %q group %q, want %s and %s", fi.Owner, fi.Group, uid, gid)
		}
		if fi.ModifiedAt != "2025-03-04T05:06:07.123456789Z" {
			t.Errorf("modifiedAt %q, want 2025-03-04T05:06:07.123456789Z", fi.ModifiedAt)
		}
		var list []toolbox.FileInfo
		if err := json.Unmarshal(e.expect(200, "GET", "/files", nil), &list); err != nil || len(list) != 1 || list[0].Owner != uid || list[0].ModifiedAt != fi.ModifiedAt {
			t.Errorf("list %+v, %v", list, err)
		}
	})
}

// A relative path with ".." resolves from the work dir, as with Daytona's
// daemon, and never above the server's root: a ".." past it stays at the
// root, so nothing outside the root is read or written (probed with a
// marker file beside the root).
func TestDotDotResolvesInsideRoot(t *testing.T) {
	bothModes(t, func(t *testing.T, daytona bool) {
		top := t.TempDir()
		root, outside := filepath.Join(top, "root"), filepath.Join(top, "outside")
		writeTree(t, root, map[string]string{"work/sub/in.txt": "inside\n", "top.txt": "top\n"})
		writeTree(t, outside, map[string]string{"secret": escapeMarker + "\n"})
		e := newEnv(t, true, func(o *Options) {
			confine(o, root)
			o.Daytona = daytona
		})
		if got := string(e.expect(200, "GET", "/files/download?path=sub/../sub/in.txt", nil)); got != "inside\n" {
			t.Errorf("sub/../sub/in.txt: %q", got)
		}
		if got := string(e.expect(200, "GET", "/files/download?path=../top.txt", nil)); got != "top\n" {
			t.Errorf("../top.txt: %q, want the root's top.txt", got)
		}
		var fi toolbox.FileInfo
		if err := json.Unmarshal(e.expect(200, "GET", "/files/info?path=../../../..", nil), &fi); err != nil || !fi.IsDir || fi.Path != "/" {
			t.Errorf("../../../.. = %+v, %v; want the root, /", fi, err)
		}
		// Past the root, "outside/secret" is the root's, which does not
		// exist: 404, as the absolute /outside/secret.
		deep := urlQuery("../../../../../../../../" + filepath.Base(outside) + "/secret")
		e.expectError(404, codeFileNotFound, "GET", "/files/download?path="+deep, nil)
		e.expectError(404, codeFileNotFound, "GET", "/files/download?path="+urlQuery("/"+filepath.Base(outside)+"/secret"), nil)
		// A write past the root lands in it.
		body, ctype := multipartBody(t, "files[0].path", "../../../../up.txt", "files[0].file", "up")
		e.expect(200, "POST", "/files/bulk-upload", body, "Content-Type", ctype)
		if got := readString(t, filepath.Join(root, "up.txt")); got != "up" {
			t.Errorf("root/up.txt = %q", got)
		}
		for _, p := range []string{filepath.Join(top, "up.txt"), filepath.Join(filepath.Dir(top), "up.txt")} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s outside the root: %v", p, err)
			}
		}
		if got := readString(t, filepath.Join(outside, "secret")); got != escapeMarker+"\n" {
			t.Errorf("the marker changed: %q", got)
		}
	})
}

// Find and search echo the caller's form of the path, as Daytona's daemon
// does: a relative path gives paths joined to it as given (cleaned), an
// absolute one absolute paths.
func TestFindSearchEchoRelativePaths(t *testing.T) {
	bothModes(t, func(t *testing.T, daytona bool) {
		e := newEnv(t, true, func(o *Options) { o.Daytona = daytona })
		writeTree(t, e.work, map[string]string{"src/a.go": "NEEDLE\n", "src/deep/b.go": "NEEDLE\n", "top.go": "NEEDLE\n"})
		for _, c := range []struct {
			path string
			want []string
		}{
			{".", []string{"src/a.go", "src/deep/b.go", "top.go"}},
			{"src", []string{"src/a.go", "src/deep/b.go"}},
			{"./src/", []string{"src/a.go", "src/deep/b.go"}},
			{"src/../src/deep", []string{"src/deep/b.go"}},
			{"src/a.go", []string{"src/a.go"}},
			{filepath.Join(e.work, "src"), []string{filepath.Join(e.work, "src/a.go"), filepath.Join(e.work, "src/deep/b.go")}},
		} {
			var got []string
			for _, m := range e.find(c.path, "NEEDLE") {
				got = append(got, m.File)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("find in %q: %q, want %q", c.path, got, c.want)
			}
			if strings.HasSuffix(c.path, ".go") {
				continue // search takes folders only
			}
			if got := e.search(c.path, "*.go"); !slices.Equal(got, c.want) {
				t.Errorf("search in %q: %q, want %q", c.path, got, c.want)
			}
		}
		// From a sub-folder's view: "../" climbs from the work dir.
		base := filepath.Base(e.work)
		want := []string{"../" + base + "/top.go"}
		if got := e.search("../"+base, "top.go"); !slices.Equal(got, want) {
			t.Errorf("search in ../%s: %q, want %q", base, got, want)
		}
	})
}
