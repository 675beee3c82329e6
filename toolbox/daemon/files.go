package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// fileRoutes serves /files.
func (s *Server) fileRoutes() []route {
	return []route{
		{"GET /files", s.handleListFiles},
		{"GET /files/{$}", s.handleListFiles}, // Daytona's SDKs may add the slash
		{"DELETE /files", s.handleDeleteFile},
		{"GET /files/info", s.handleFileInfo},
		{"GET /files/download", s.handleDownload},
		{"POST /files/bulk-download", s.handleBulkDownload},
		{"POST /files/upload", s.handleUploadV1},
		{"POST /files/upload-v2", s.handleUploadV2},
		{"POST /files/bulk-upload", s.handleBulkUpload},
		{"POST /files/folder", s.handleCreateFolder},
		{"POST /files/move", s.handleMove},
		{"GET /files/find", s.handleFind},
		{"GET /files/search", s.handleSearch},
		{"POST /files/replace", s.handleReplace},
		{"POST /files/permissions", s.handlePermissions},
	}
}

// resolve turns a request path into an absolute, cleaned path inside the
// server's root: relative paths are taken from the work dir (".." climbs
// from it, never above the root); absolute paths are allowed; NUL bytes
// are rejected.
func (s *Server) resolve(p string) (string, error) {
	return resolvePath(s.workDir, p)
}

func resolvePath(base, p string) (string, error) {
	if p == "" {
		return "", badRequest("path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", badRequest("path %q contains a NUL byte", p)
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	// A relative path is the work dir's, ".." included, as with Daytona's
	// daemon: "../x" is the work dir's parent's x. Cleaning an absolute
	// path never climbs above "/" (a ".." past it stays there), and "/" is
	// the server's root (Options.Root), so the result is a path inside the
	// sandbox as any absolute one is, resolved by fsRoot as they are.
	return filepath.Join(base, p), nil
}

// queryPath reads and resolves a required path query parameter.
func (s *Server) queryPath(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return "", badRequest("query parameter %q is required", name)
	}
	return s.resolve(v)
}

// atQueryPath resolves the path in the query parameter name and applies
// op (os.Stat, os.Open …) to it, mapping op's error with fsError.
func atQueryPath[T any](s *Server, r *http.Request, name string, op func(string) (T, error)) (string, T, error) {
	var zero T
	p, err := s.queryPath(r, name)
	if err != nil {
		return "", zero, err
	}
	v, err := op(p)
	if err != nil {
		return "", zero, fsError(p, err)
	}
	return p, v, nil
}

// fsError maps a file-system error to an API error.
func fsError(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &httpError{status: http.StatusNotFound, code: codeFileNotFound, msg: fmt.Sprintf("file %q not found", p)}
	case errors.Is(err, fs.ErrPermission):
		return &httpError{status: http.StatusForbidden, code: codeFileAccessDenied, msg: fmt.Sprintf("access to %q denied", p)}
	case errors.Is(err, syscall.ENOTEMPTY):
		return badRequest("directory %q is not empty; pass recursive=true to delete it with its contents", p)
	case errors.Is(err, fs.ErrExist):
		return &httpError{status: http.StatusConflict, code: codeConflict, msg: fmt.Sprintf("%q already exists", p)}
	case errors.Is(err, syscall.ENOTDIR):
		return badRequest("a parent of %q is not a directory", p)
	case errors.Is(err, syscall.EISDIR):
		return badRequest("%q is a directory", p)
	case errors.Is(err, errNotDownloadable), errors.Is(err, syscall.ENXIO): // ENXIO: open of a socket
		return badRequest("%q is %v", p, errNotDownloadable)
	case errors.Is(err, errMagicLink), errors.Is(err, syscall.ELOOP):
		return badRequest("path %q cannot be resolved inside the sandbox: %v", p, errMagicLink)
	case errors.Is(err, errNoOpenat2):
		return errorf(http.StatusNotImplemented, codeInternal, "%s: %v", p, errNoOpenat2)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// fileInfo describes the file at p as Daytona's daemon does: owner and
// group as numeric ids (decimal strings), modifiedAt in RFC 3339 with its
// sub-second part (Go's time.Time in JSON), modTime in Go's time.String
// layout.
func (s *Server) fileInfo(p string, fi fs.FileInfo) toolbox.FileInfo {
	out := toolbox.FileInfo{
		Name:        fi.Name(),
		Path:        p,
		Size:        fi.Size(),
		Mode:        fi.Mode().String(),
		Permissions: fmt.Sprintf("%04o", fi.Mode().Perm()),
		IsDir:       fi.IsDir(),
		ModifiedAt:  fi.ModTime().UTC().Format(time.RFC3339Nano),
		ModTime:     fi.ModTime().String(),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.Owner = strconv.FormatUint(uint64(st.Uid), 10)
		out.Group = strconv.FormatUint(uint64(st.Gid), 10)
	}
	return out
}

func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) error {
	dir := s.workDir
	if v := r.URL.Query().Get("path"); v != "" {
		p, err := s.resolve(v)
		if err != nil {
			return err
		}
		dir = p
	}
	depth := 1
	if v := r.URL.Query().Get("depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return badRequest("depth must be an integer >= 1, got %q", v)
		}
		depth = n
	}
	fi, err := s.root.stat(dir)
	if err != nil {
		return fsError(dir, err)
	}
	if !fi.IsDir() {
		return badRequest("%q is not a directory; use /files/info for a file", dir)
	}
	out := []toolbox.FileInfo{}
	err = s.root.walk(r.Context(), dir, walkOptions{maxDepth: depth}, func(e walkEntry) error {
		out = append(out, s.fileInfo(e.path, e.info))
		return nil
	})
	if err != nil {
		return fsError(dir, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleFileInfo(w http.ResponseWriter, r *http.Request) error {
	p, fi, err := atQueryPath(s, r, "path", s.root.stat)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.fileInfo(p, fi))
	return nil
}

// errNotDownloadable refuses a FIFO or a socket: reading one would wait
// for a writer that may never come.
var errNotDownloadable = errors.New("not a regular file, a folder or a device (a FIFO or a socket): it cannot be downloaded")

// openForDownload opens p for reading without waiting: a FIFO opened for
// reading would block until someone opened it for writing, so it is
// refused (errNotDownloadable, a 400), as is a socket. Regular files and
// devices are read as usual.
func (s *Server) openForDownload(p string) (*os.File, error) {
	f, err := s.root.openRead(p)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0 {
		f.Close()
		return nil, errNotDownloadable
	}
	// Reads block again, as a device's reader expects.
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) error {
	p, f, err := atQueryPath(s, r, "path", s.openForDownload)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsError(p, err)
	}
	if fi.IsDir() {
		return badRequest("%q is a directory; list it with GET /files", p)
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(p)}))
	if fi.Mode().IsRegular() {
		h.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	}
	w.WriteHeader(http.StatusOK)
	rd := &readErr{r: f}
	if _, err := io.Copy(w, rd); err != nil && rd.err != nil {
		// The file failed: the connection closes, never a clean end.
		return errClosed
	}
	return nil
}

func (s *Server) handleBulkDownload(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.FilesDownloadRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Paths) == 0 {
		return badRequest("paths must list at least one file")
	}
	mw := multipart.NewWriter(w)
	w.Header().Set("Content-Type", "multipart/form-data; boundary="+mw.Boundary())
	w.WriteHeader(http.StatusOK)
	for _, raw := range req.Paths {
		if err := s.writeDownloadPart(mw, r, raw); err != nil {
			// The client is gone, or a part could not be sent whole:
			// closing the connection says the answer is incomplete.
			return errClosed
		}
	}
	_ = mw.Close()
	return nil
}

// downloadPartHeader is the header of a bulk-download part named name
// ("file" or "error") for the requested path raw, whose body is size
// bytes long (-1: unknown). Content-Disposition names name first and
// filename second, both quoted, and each part says its length: the
// official TypeScript SDK's fallback multipart parser reads them so.
func downloadPartHeader(name, raw, ctype string, size int64) textproto.MIMEHeader {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", multipart.FileContentDisposition(name, raw))
	h.Set("Content-Type", ctype)
	if size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	return h
}

// writeDownloadPart writes one file part, or an error part when the file
// cannot be read. It returns an error only when the part could not be
// written whole: the client is gone, or the file shrank while it was sent.
func (s *Server) writeDownloadPart(mw *multipart.Writer, r *http.Request, raw string) error {
	fail := func(err error) error {
		he := asHTTPError(err)
		body, _ := json.Marshal(errorBody(r, he.status, he.code, he.Error()))
		pw, err := mw.CreatePart(downloadPartHeader("error", raw, "application/json", int64(len(body))))
		if err != nil {
			return err
		}
		_, err = pw.Write(body)
		return err
	}
	p, err := s.resolve(raw)
	if err != nil {
		return fail(err)
	}
	f, err := s.openForDownload(p)
	if err != nil {
		return fail(fsError(p, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(fsError(p, err))
	}
	if fi.IsDir() {
		return fail(badRequest("%q is a directory", p))
	}
	if !fi.Mode().IsRegular() {
		pw, err := mw.CreatePart(downloadPartHeader("file", raw, "application/octet-stream", -1))
		if err != nil {
			return err
		}
		_, err = io.Copy(pw, f)
		return err
	}
	// The size announced is the size sent: a file that grows meanwhile
	// is cut there, one that shrinks fails the answer.
	pw, err := mw.CreatePart(downloadPartHeader("file", raw, "application/octet-stream", fi.Size()))
	if err != nil {
		return err
	}
	_, err = io.CopyN(pw, f, fi.Size())
	return err
}

// writeFile streams src into path, creating parent directories.
func (s *Server) writeFile(path string, src io.Reader) (int64, error) {
	dir, _ := splitPath(path)
	if err := s.root.mkdirAll(dir, 0o755); err != nil {
		return 0, fsError(dir, err)
	}
	f, err := s.root.create(path, 0o644)
	if err != nil {
		return 0, fsError(path, err)
	}
	n, err := io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("writing %s: %w", path, err)
	}
	return n, nil
}

// uploadFromMultipart streams the part named field into path.
func (s *Server) uploadFromMultipart(r *http.Request, field, path string) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return badRequest("a multipart/form-data body is required: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return badRequest("the multipart body has no part named %q", field)
		}
		if err != nil {
			return badRequest("reading the multipart body: %v", err)
		}
		if part.FormName() != field {
			part.Close()
			continue
		}
		_, err = s.writeFile(path, part)
		part.Close()
		return err
	}
}

func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && strings.HasPrefix(mt, "multipart/")
}

// handleUploadV1 is the v0.190 daemon's POST /files/upload: multipart field
// "file", empty 200 answer.
func (s *Server) handleUploadV1(w http.ResponseWriter, r *http.Request) error {
	p, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	if err := s.uploadFromMultipart(r, "file", p); err != nil {
		return err
	}
	// v0.190 answers gin.H: an empty object.
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// handleUploadV2 is the cloud POST /files/upload-v2: multipart field "file"
// or a raw body; answers {name, path, type}.
func (s *Server) handleUploadV2(w http.ResponseWriter, r *http.Request) error {
	p, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	if isMultipart(r) {
		err = s.uploadFromMultipart(r, "file", p)
	} else {
		_, err = s.writeFile(p, r.Body)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toolbox.UploadedFile{Name: filepath.Base(p), Path: p, Type: "file"})
	return nil
}

// bulkUploadError is the 400 answer of a bulk upload: an ErrorResponse that
// also lists the per-file errors and the files that were written.
type bulkUploadError struct {
	toolbox.ErrorResponse
	Errors []string                   `json:"errors"`
	Files  []toolbox.BulkUploadedFile `json:"files"`
}

// handleBulkUpload streams parts files[i].path and files[i].file to disk;
// each path part must precede its file part.
func (s *Server) handleBulkUpload(w http.ResponseWriter, r *http.Request) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return badRequest("a multipart/form-data body is required: %v", err)
	}
	paths := map[string]string{}
	resp := toolbox.BulkUploadResponse{Files: []toolbox.BulkUploadedFile{}}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("reading the multipart body: %v", err))
			break
		}
		name := part.FormName()
		switch {
		case strings.HasPrefix(name, "files[") && strings.HasSuffix(name, "].path"):
			key := name[len("files[") : len(name)-len("].path")]
			v, err := io.ReadAll(io.LimitReader(part, 4097))
			switch {
			case err != nil:
				resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", name, err))
			case len(v) > 4096:
				resp.Errors = append(resp.Errors, fmt.Sprintf("%s: path longer than 4096 bytes", name))
			default:
				paths[key] = string(v)
			}
		case strings.HasPrefix(name, "files[") && strings.HasSuffix(name, "].file"):
			key := name[len("files[") : len(name)-len("].file")]
			raw, ok := paths[key]
			if !ok {
				resp.Errors = append(resp.Errors, fmt.Sprintf("%s: no files[%s].path part before it; send each path part before its file part", name, key))
				break
			}
			p, err := s.resolve(raw)
			if err != nil {
				resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", raw, err))
				break
			}
			n, err := s.writeFile(p, part)
			if err != nil {
				resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", raw, err))
				break
			}
			resp.Files = append(resp.Files, toolbox.BulkUploadedFile{Path: p, Bytes: n})
		}
		part.Close()
	}
	if len(resp.Errors) > 0 {
		msg := fmt.Sprintf("%d of the uploads failed: %s", len(resp.Errors), strings.Join(resp.Errors, "; "))
		writeJSON(w, http.StatusBadRequest, bulkUploadError{
			ErrorResponse: errorBody(r, http.StatusBadRequest, codeBadRequest, msg),
			Errors:        resp.Errors,
			Files:         resp.Files,
		})
		return nil
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) handleCreateFolder(w http.ResponseWriter, r *http.Request) error {
	p, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	mode := fs.FileMode(0o755)
	if v := r.URL.Query().Get("mode"); v != "" {
		n, err := strconv.ParseUint(v, 8, 32)
		if err != nil || n > 0o7777 {
			return badRequest("mode must be an octal permission such as 0755, got %q", v)
		}
		mode = fs.FileMode(n)
	}
	if err := s.root.mkdirAll(p, mode); err != nil {
		return fsError(p, err)
	}
	// mkdirAll applies the umask; set the mode asked for on the leaf.
	_ = s.root.chmod(p, mode)
	w.WriteHeader(http.StatusCreated)
	return nil
}

// handleDeleteFile is DELETE /files: it removes a file, or with
// recursive=true a directory tree, refusing / and the work dir.
func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	if p == "/" {
		return badRequest("refusing to delete / (path %q)", r.URL.Query().Get("path"))
	}
	if p == s.workDir || strings.HasPrefix(s.workDir, p+"/") {
		return badRequest("refusing to delete %s (path %q): it is or holds the work dir %s; delete the entries inside it instead", p, r.URL.Query().Get("path"), s.workDir)
	}
	fi, err := s.root.lstat(p)
	if err != nil {
		return fsError(p, err)
	}
	// The same directory under another name (a bind mount, a path through
	// a symbolic link to one of its parents). A symbolic link itself is
	// only unlinked, which is harmless.
	if wd, err := s.root.stat(s.workDir); err == nil && fi.IsDir() && sameFile(fi, wd) {
		return badRequest("refusing to delete %s (path %q): it is the work dir %s; delete the entries inside it instead", p, r.URL.Query().Get("path"), s.workDir)
	}
	recursive := r.URL.Query().Get("recursive") == "true"
	if fi.IsDir() && recursive {
		err = s.root.removeAll(p)
	} else {
		err = s.root.remove(p)
	}
	if err != nil {
		return fsError(p, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleMove is POST /files/move: it renames source to destination, which
// must not exist.
func (s *Server) handleMove(w http.ResponseWriter, r *http.Request) error {
	src, err := s.queryPath(r, "source")
	if err != nil {
		return err
	}
	dst, err := s.queryPath(r, "destination")
	if err != nil {
		return err
	}
	if _, err := s.root.lstat(src); err != nil {
		return fsError(src, err)
	}
	if _, err := s.root.lstat(dst); err == nil {
		return errorf(http.StatusConflict, codeConflict, "destination %q already exists; delete it first", dst)
	}
	if err := s.root.rename(src, dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errorf(http.StatusConflict, codeConflict, "destination %q already exists; delete it first", dst)
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = &httpError{status: http.StatusNotFound, code: codeFileNotFound, msg: fmt.Sprintf("the folder of destination %q does not exist; create it first", dst)}
		} else {
			err = fsError(src, err)
		}
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
