package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// multipartBody builds a multipart body from name/content pairs.
func multipartBody(t *testing.T, parts ...string) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(parts); i += 2 {
		var w io.Writer
		var err error
		if strings.HasSuffix(parts[i], ".path") {
			w, err = mw.CreateFormField(parts[i])
		} else {
			w, err = mw.CreateFormFile(parts[i], "blob")
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, parts[i+1])
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

func TestFilesRoundTrip(t *testing.T) {
	e := newEnv(t, true)
	body, ctype := multipartBody(t, "files[0].path", "a/b/one.txt", "files[0].file", "hello",
		"files[1].path", filepath.Join(e.work, "two.bin"), "files[1].file", "\x00\x01\x02")
	var up toolbox.BulkUploadResponse
	json.Unmarshal(e.expect(200, "POST", "/files/bulk-upload", body, "Content-Type", ctype), &up)
	if len(up.Files) != 2 || up.Files[0].Path != filepath.Join(e.work, "a/b/one.txt") || up.Files[0].Bytes != 5 || up.Files[1].Bytes != 3 {
		t.Errorf("bulk upload %+v", up)
	}
	if got := e.expect(200, "GET", "/files/download?path=a/b/one.txt", nil); string(got) != "hello" {
		t.Errorf("download %q", got)
	}
	var fi toolbox.FileInfo
	json.Unmarshal(e.expect(200, "GET", "/files/info?path=a/b/one.txt", nil), &fi)
	if fi.Name != "one.txt" || fi.Size != 5 || fi.IsDir || fi.Mode != "-rw-r--r--" || fi.Permissions != "0644" || fi.Owner == "" || fi.Path != filepath.Join(e.work, "a/b/one.txt") {
		t.Errorf("info %+v", fi)
	}
	if _, err := time.Parse(time.RFC3339, fi.ModifiedAt); err != nil {
		t.Errorf("modifiedAt %q", fi.ModifiedAt)
	}
	var list []toolbox.FileInfo
	json.Unmarshal(e.expect(200, "GET", "/files", nil), &list)
	if len(list) != 2 || list[0].Name != "a" || !list[0].IsDir || list[1].Name != "two.bin" {
		t.Errorf("list %+v", list)
	}
	json.Unmarshal(e.expect(200, "GET", "/files?path=.&depth=3", nil), &list)
	if len(list) != 4 {
		t.Errorf("deep list %+v", list)
	}

	// upload-v2: raw body and multipart.
	var uf toolbox.UploadedFile
	json.Unmarshal(e.raw.expect(200, "POST", "/files/upload-v2?path=raw.txt", []byte("raw body"), "Content-Type", "application/octet-stream"), &uf)
	if uf.Name != "raw.txt" || uf.Path != filepath.Join(e.work, "raw.txt") || uf.Type == "" {
		t.Errorf("upload-v2 %+v", uf)
	}
	body, ctype = multipartBody(t, "file", "multi")
	e.expect(200, "POST", "/files/upload-v2?path=dir/m.txt", body, "Content-Type", ctype)
	if b, _ := os.ReadFile(filepath.Join(e.work, "dir/m.txt")); string(b) != "multi" {
		t.Errorf("upload-v2 multipart wrote %q", b)
	}
	// v0.190 upload.
	body, ctype = multipartBody(t, "file", "v1")
	e.expect(200, "POST", "/files/upload?path=v1.txt", body, "Content-Type", ctype)
	if b, _ := os.ReadFile(filepath.Join(e.work, "v1.txt")); string(b) != "v1" {
		t.Errorf("upload wrote %q", b)
	}

	// bulk download: one good file, one missing.
	resp, data := e.raw.do("POST", "/files/bulk-download", toolbox.FilesDownloadRequest{Paths: []string{"raw.txt", "missing.txt"}})
	mt, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != 200 || mt != "multipart/form-data" {
		t.Fatalf("bulk download %d %s", resp.StatusCode, mt)
	}
	mr := multipart.NewReader(bytes.NewReader(data), params["boundary"])
	var names []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(p)
		names = append(names, p.FormName()+":"+p.FileName()+":"+string(b[:min(len(b), 8)]))
	}
	if len(names) != 2 || names[0] != "file:raw.txt:raw body" || !strings.HasPrefix(names[1], "error:missing.txt:") {
		t.Errorf("bulk download parts %q", names)
	}

	// folder, move, delete.
	e.expect(201, "POST", "/files/folder?path=newdir&mode=0700", nil)
	if st, err := os.Stat(filepath.Join(e.work, "newdir")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("folder: %v %v", st, err)
	}
	e.expect(201, "POST", "/files/folder?path=newdir2&mode=0755", nil)
	e.expect(200, "POST", "/files/move?source=raw.txt&destination=newdir/moved.txt", nil)
	if _, err := os.Stat(filepath.Join(e.work, "newdir/moved.txt")); err != nil {
		t.Errorf("move: %v", err)
	}
	e.expectError(409, codeConflict, "POST", "/files/move?source=v1.txt&destination=newdir/moved.txt", nil)
	e.expectError(400, codeBadRequest, "DELETE", "/files?path=newdir", nil)
	e.expect(204, "DELETE", "/files?path=newdir&recursive=true", nil)
	e.expect(204, "DELETE", "/files?path=v1.txt", nil)
	if _, err := os.Stat(filepath.Join(e.work, "newdir")); !os.IsNotExist(err) {
		t.Errorf("delete left %v", err)
	}
	// Missing files.
	e.raw.expectError(404, codeFileNotFound, "GET", "/files/download?path=nope", nil)
	e.expectError(404, codeFileNotFound, "GET", "/files/info?path=nope", nil)
	e.expectError(404, codeFileNotFound, "DELETE", "/files?path=nope", nil)
	e.expectError(404, codeFileNotFound, "GET", "/files?path=nope", nil)
	e.expectError(404, codeFileNotFound, "POST", "/files/move?source=nope&destination=x", nil)
}

func TestFilesRejectTraversal(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	os.Mkdir(work, 0o755)
	victim := filepath.Join(root, "victim.txt")
	os.WriteFile(victim, []byte("keep"), 0o644)
	e := newErrEnv(t, func(o *Options) { o.WorkDir = work })
	snapshot := func() string {
		var b strings.Builder
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !strings.HasPrefix(p, work) {
				fmt.Fprintf(&b, "%s %d %v\n", p, fi.Size(), fi.ModTime())
			}
			return nil
		})
		return b.String()
	}
	before := snapshot()
	// A relative ".." resolves from the work dir as with Daytona's daemon
	// (issue 27; TestDotDotResolvesInsideRoot): only a NUL byte is bad.
	bad := []string{"nul\x00byte"}
	for _, p := range bad {
		q := "path=" + urlQuery(p)
		e.expectError(400, codeBadRequest, "GET", "/files/download?"+q, nil)
		e.expectError(400, codeBadRequest, "GET", "/files/info?"+q, nil)
		e.expectError(400, codeBadRequest, "GET", "/files?"+q, nil)
		e.expectError(400, codeBadRequest, "DELETE", "/files?recursive=true&"+q, nil)
		e.expectError(400, codeBadRequest, "POST", "/files/folder?"+q, nil)
		e.expectError(400, codeBadRequest, "POST", "/files/upload-v2?"+q, []byte("evil"))
		e.expectError(400, codeBadRequest, "POST", "/files/move?source=ok&destination="+urlQuery(p), nil)
		e.expectError(400, codeBadRequest, "POST", "/files/move?destination=ok&source="+urlQuery(p), nil)
		body, ctype := multipartBody(t, "files[0].path", p, "files[0].file", "evil")
		er := e.expectError(400, codeBadRequest, "POST", "/files/bulk-upload", body, "Content-Type", ctype)
		if !strings.Contains(er.Message, "1 of the uploads failed") {
			t.Errorf("bulk upload message %q", er.Message)
		}
		e.expectError(400, codeBadRequest, "POST", "/process/execute", toolbox.ExecuteRequest{Command: "true", Cwd: p})
	}
	// A file part without its path part first is refused.
	body, ctype := multipartBody(t, "files[0].file", "evil", "files[0].path", "x")
	e.expectError(400, codeBadRequest, "POST", "/files/bulk-upload", body, "Content-Type", ctype)
	// Paths that stay inside after cleaning are fine.
	e.expect(201, "POST", "/files/folder?path=a/../b", nil)
	if after := snapshot(); after != before {
		t.Errorf("files outside the work dir changed:\nbefore %s\nafter %s", before, after)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim changed: %q", b)
	}
	// Other bad queries.
	e.expectError(400, codeBadRequest, "GET", "/files/info", nil)
	e.expectError(400, codeBadRequest, "GET", "/files?depth=0", nil)
	e.expectError(400, codeBadRequest, "POST", "/files/folder?path=x&mode=999", nil)
	e.expectError(400, codeBadRequest, "DELETE", "/files?path=/&recursive=true", nil)
	e.expectError(400, codeBadRequest, "POST", "/files/upload?path=x", []byte("not multipart"))
	e.expectError(413, codeInvalidRequestBody, "POST", "/files/bulk-download", []byte(`{"paths":["`+strings.Repeat("a", DefaultMaxBodyBytes)+`"]}`))
}

func urlQuery(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "\x00", "%00", "+", "%2B", "#", "%23", "?", "%3F").Replace(s)
}

// Uploads stream: a big file passes without the server buffering it.
func TestBulkUploadStreams(t *testing.T) {
	e := newErrEnv(t)
	const size = 64 << 20
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		w, _ := mw.CreateFormField("files[0].path")
		io.WriteString(w, "big.bin")
		w, _ = mw.CreateFormFile("files[0].file", "big.bin")
		chunk := make([]byte, 1<<20)
		for i := 0; i < size/len(chunk); i++ {
			if _, err := w.Write(chunk); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		mw.Close()
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", baseURL+"/files/bulk-upload", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if st, err := os.Stat(filepath.Join(e.work, "big.bin")); err != nil || st.Size() != size {
		t.Errorf("stat %v %v", st, err)
	}
}

// DELETE refuses the work dir itself (under any name), its parents and /,
// recursive or not; entries inside stay deletable.
func TestDeleteRefusesWorkDir(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	os.Mkdir(work, 0o755)
	os.Symlink(root, filepath.Join(root, "alias"))
	e := newErrEnv(t, func(o *Options) { o.WorkDir = work })
	os.WriteFile(filepath.Join(work, "keep"), []byte("x"), 0o644)
	for _, p := range []string{".", "./", "a/..", work, work + "/", root, "/",
		filepath.Join(root, "alias", "work")} {
		for _, rec := range []string{"true", "false"} {
			er := e.expectError(400, codeBadRequest, "DELETE", "/files?recursive="+rec+"&path="+urlQuery(p), nil)
			if !strings.Contains(er.Message, "refusing to delete") || !strings.Contains(er.Message, fmt.Sprintf("%q", p)) {
				t.Errorf("path %q: message %q", p, er.Message)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "keep")); err != nil || string(b) != "x" {
		t.Fatalf("work dir content gone: %q %v", b, err)
	}
	os.Mkdir(filepath.Join(work, "sub"), 0o755)
	e.expect(204, "DELETE", "/files?recursive=true&path=sub", nil)
	e.expect(204, "DELETE", "/files?path=keep", nil)
	// A symbolic link to the work dir is only unlinked.
	link := filepath.Join(root, "link")
	os.Symlink(work, link)
	e.expect(204, "DELETE", "/files?recursive=true&path="+urlQuery(link), nil)
	if _, err := os.Stat(work); err != nil {
		t.Fatalf("work dir: %v", err)
	}
}

// TestDownloadFIFORefused: a FIFO (or a socket) is refused at once with a
// 400, alone or in a bulk download, instead of the server waiting for a
// writer that may never come.
func TestDownloadFIFORefused(t *testing.T) {
	e := newErrEnv(t)
	if err := syscall.Mkfifo(filepath.Join(e.work, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(e.work, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, name := range []string{"fifo", "sock"} {
		er := e.expectError(http.StatusBadRequest, codeBadRequest, "GET", "/files/download?path="+name, nil)
		if !strings.Contains(er.Message, "cannot be downloaded") {
			t.Errorf("download of a %s: %q", name, er.Message)
		}
		resp, data := e.raw.do("POST", "/files/bulk-download", toolbox.FilesDownloadRequest{Paths: []string{name}})
		_, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		p, err := multipart.NewReader(bytes.NewReader(data), params["boundary"]).NextPart()
		if err != nil || p.FormName() != "error" {
			t.Errorf("bulk download of a %s: part %v, %v", name, p, err)
		}
	}
}
