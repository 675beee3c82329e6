package daemon

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestPermissionsSetMode(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a.sh": ""})
	for mode, want := range map[string]os.FileMode{"755": 0o755, "0600": 0o600, "4750": 0o750 | os.ModeSetuid} {
		e.expect(200, "POST", "/files/permissions?path=a.sh&mode="+mode, nil)
		if fi, _ := os.Stat(filepath.Join(e.work, "a.sh")); fi.Mode() != want {
			t.Errorf("mode %s gave %v, want %v", mode, fi.Mode(), want)
		}
	}
}

// Owner and group change, by number or by name, and a set-user-ID mode
// asked for in the same request survives the change of owner.
func TestPermissionsSetOwner(t *testing.T) {
	testenv.NeedRoot(t, "changing a file's owner needs root")
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a": ""})
	p := filepath.Join(e.work, "a")
	e.expect(200, "POST", "/files/permissions?path=a&owner=1234&group=5678&mode=4755", nil)
	fi, _ := os.Stat(p)
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234 || st.Gid != 5678 || fi.Mode() != 0o755|os.ModeSetuid {
		t.Errorf("owner %d:%d mode %v", st.Uid, st.Gid, fi.Mode())
	}
	e.expect(200, "POST", "/files/permissions?path=a&owner=root&group=root", nil)
	fi, _ = os.Stat(p)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		t.Errorf("by name: owner %d:%d", st.Uid, st.Gid)
	}
}

// An invalid parameter refuses the request whole: neither the owner nor
// the mode changes.
func TestPermissionsBadInputChangesNothing(t *testing.T) {
	e := newErrEnv(t)
	writeTree(t, e.work, map[string]string{"a": ""})
	p := filepath.Join(e.work, "a")
	os.Chmod(p, 0o640)
	before, _ := os.Stat(p)
	for _, q := range []string{
		"path=a&mode=999", "path=a&mode=17777", "path=a&mode=rwx", "path=a&mode=-1",
		"path=a&mode=0700&owner=no-such-user-agentbox", "path=a&mode=0700&group=no-such-group-agentbox",
		"path=a&mode=0700&owner=-5", "mode=0700",
	} {
		e.expectError(400, codeBadRequest, "POST", "/files/permissions?"+q, nil)
	}
	e.expectError(404, codeFileNotFound, "POST", "/files/permissions?path=missing&mode=0700", nil)
	after, _ := os.Stat(p)
	bs, as := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
	if after.Mode() != before.Mode() || as.Uid != bs.Uid || as.Gid != bs.Gid {
		t.Errorf("changed: mode %v→%v owner %d:%d→%d:%d", before.Mode(), after.Mode(), bs.Uid, bs.Gid, as.Uid, as.Gid)
	}
}

// dispositionParam reads a Content-Disposition parameter the way the
// official TypeScript SDK's fallback multipart parser does: the first
// "<key>=" or "<key>*=" anywhere in the value, up to the next ';', quotes
// trimmed.
func dispositionParam(disposition, key string) string {
	m := regexp.MustCompile(`(?i)` + key + `\*?=([^;]+)`).FindStringSubmatch(disposition)
	if m == nil {
		return ""
	}
	return regexp.MustCompile(`^"|"$`).ReplaceAllString(m[1], "")
}

// Each bulk-download part names "file" or "error" first and the requested
// path second, quoted, and says its length, so that the TypeScript SDK's
// fallback parser reads the part name and the path right.
func TestBulkDownloadPartHeaders(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"dir/a b.txt": "hello"})
	resp, data := e.raw.do("POST", "/files/bulk-download", toolbox.FilesDownloadRequest{Paths: []string{"dir/a b.txt", "missing.txt"}})
	_, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	boundary := []byte("--" + params["boundary"])
	var parts []textproto.MIMEHeader
	var bodies [][]byte
	for _, chunk := range bytes.Split(data, boundary)[1:] {
		if bytes.HasPrefix(chunk, []byte("--")) {
			break
		}
		tr := textproto.NewReader(bufio.NewReader(bytes.NewReader(bytes.TrimPrefix(chunk, []byte("\r\n")))))
		h, err := tr.ReadMIMEHeader()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr.R)
		parts = append(parts, h)
		bodies = append(bodies, bytes.TrimSuffix(body, []byte("\r\n")))
	}
	if len(parts) != 2 {
		t.Fatalf("%d parts", len(parts))
	}
	for i, want := range []struct{ name, file, disposition string }{
		{"file", "dir/a b.txt", `form-data; name="file"; filename="dir/a b.txt"`},
		{"error", "missing.txt", `form-data; name="error"; filename="missing.txt"`},
	} {
		d := parts[i].Get("Content-Disposition")
		if d != want.disposition || dispositionParam(d, "name") != want.name || dispositionParam(d, "filename") != want.file {
			t.Errorf("part %d: Content-Disposition %q", i, d)
		}
		if n, err := strconv.Atoi(parts[i].Get("Content-Length")); err != nil || n != len(bodies[i]) {
			t.Errorf("part %d: Content-Length %q for %d bytes", i, parts[i].Get("Content-Length"), len(bodies[i]))
		}
	}
	if string(bodies[0]) != "hello" {
		t.Errorf("file part %q", bodies[0])
	}
}

// GET /files/ lists like GET /files; other paths below /files/ stay
// unknown.
func TestListFilesTrailingSlash(t *testing.T) {
	e := newEnv(t, true)
	writeTree(t, e.work, map[string]string{"a": "", "b/c": ""})
	plain := e.expect(200, "GET", "/files?path=.", nil)
	slash := e.raw.expect(200, "GET", "/files/?path=.", nil)
	if !bytes.Equal(plain, slash) {
		t.Errorf("GET /files/ %s\nGET /files %s", slash, plain)
	}
	e.raw.expectError(404, codeNotFound, "GET", "/files/nothing-here", nil)
}
