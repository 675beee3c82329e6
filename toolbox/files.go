package toolbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

func checkPath(what, p string) error {
	if p == "" {
		return fmt.Errorf("toolbox: %s is empty: %w", what, sandbox.ErrInvalidArgument)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("toolbox: %s contains a NUL byte: %w", what, sandbox.ErrInvalidArgument)
	}
	return nil
}

// ListFiles lists a directory (GET /files). An empty path lists the
// server's working directory.
func (c *Client) ListFiles(ctx context.Context, dir string) ([]FileInfo, error) {
	var q url.Values
	if dir != "" {
		q = url.Values{"path": {dir}}
	}
	var list []FileInfo
	if err := c.doJSON(ctx, http.MethodGet, "/files", q, nil, nil, &list); err != nil {
		return nil, err
	}
	return list, nil
}

// GetFileInfo describes one file (GET /files/info). A missing file gives
// an error matching sandbox.ErrNotFound.
func (c *Client) GetFileInfo(ctx context.Context, p string) (*FileInfo, error) {
	if err := checkPath("path", p); err != nil {
		return nil, err
	}
	var fi FileInfo
	if err := c.doJSON(ctx, http.MethodGet, "/files/info", url.Values{"path": {p}}, nil, nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// Download streams a file's content (GET /files/download). The caller must
// close the reader. A missing file gives an error matching
// sandbox.ErrNotFound.
func (c *Client) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := checkPath("path", p); err != nil {
		return nil, err
	}
	req, err := c.request(ctx, http.MethodGet, "/files/download", url.Values{"path": {p}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// UploadFile is one file for Upload: its destination path in the sandbox
// and its content.
type UploadFile struct {
	Path    string
	Content io.Reader
}

// Upload writes files (POST /files/bulk-upload), creating parent
// directories. The body is streamed: contents are read while the request is
// sent, never buffered whole. Upload returns only after every Content read
// in progress has returned, so a reader that blocks forever blocks it too.
func (c *Client) Upload(ctx context.Context, files ...UploadFile) error {
	if len(files) == 0 {
		return fmt.Errorf("toolbox: upload: no files given: %w", sandbox.ErrInvalidArgument)
	}
	for i, f := range files {
		if err := checkPath(fmt.Sprintf("upload file %d's Path", i), f.Path); err != nil {
			return err
		}
		if f.Content == nil {
			return fmt.Errorf("toolbox: upload of %q: Content is nil: %w", f.Path, sandbox.ErrInvalidArgument)
		}
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeUpload(mw, files))
	}()
	req, err := c.request(ctx, http.MethodPost, "/files/bulk-upload", nil, pr)
	if err == nil {
		req.Header.Set("Content-Type", mw.FormDataContentType())
		var resp *http.Response
		resp, err = c.send(req)
		if err == nil {
			var r BulkUploadResponse
			if decodeJSON(resp, maxJSONBytes, &r) == nil && len(r.Errors) > 0 {
				err = &APIError{StatusCode: resp.StatusCode, Message: strings.Join(r.Errors, "; "), Method: req.Method, Path: req.URL.Path}
			}
			closeBody(resp.Body)
		}
	}
	// Stop the writer if the request ended before reading everything,
	// and wait for it: no goroutine outlives the call.
	_ = pr.CloseWithError(errors.New("toolbox: upload request ended"))
	<-done
	return err
}

func writeUpload(mw *multipart.Writer, files []UploadFile) error {
	for i, f := range files {
		prefix := "files[" + strconv.Itoa(i) + "]"
		// The path part must come before its file part: servers stream.
		if err := mw.WriteField(prefix+".path", f.Path); err != nil {
			return err
		}
		w, err := mw.CreateFormFile(prefix+".file", path.Base(f.Path))
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, f.Content); err != nil {
			return fmt.Errorf("toolbox: upload of %q: reading content: %w", f.Path, err)
		}
	}
	return mw.Close()
}

// CreateFolder creates a directory with permission bits mode (0 means
// 0755) (POST /files/folder).
func (c *Client) CreateFolder(ctx context.Context, p string, mode fs.FileMode) error {
	if err := checkPath("path", p); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o755
	}
	q := url.Values{"path": {p}, "mode": {fmt.Sprintf("%04o", mode.Perm())}}
	return c.doJSON(ctx, http.MethodPost, "/files/folder", q, nil, nil, nil)
}

// Delete removes a file or, with recursive, a directory tree
// (DELETE /files).
func (c *Client) Delete(ctx context.Context, p string, recursive bool) error {
	if err := checkPath("path", p); err != nil {
		return err
	}
	q := url.Values{"path": {p}}
	if recursive {
		q.Set("recursive", "true")
	}
	return c.doJSON(ctx, http.MethodDelete, "/files", q, nil, nil, nil)
}

// Move renames or moves a file or directory (POST /files/move).
func (c *Client) Move(ctx context.Context, src, dst string) error {
	if err := checkPath("source path", src); err != nil {
		return err
	}
	if err := checkPath("destination path", dst); err != nil {
		return err
	}
	q := url.Values{"source": {src}, "destination": {dst}}
	return c.doJSON(ctx, http.MethodPost, "/files/move", q, nil, nil, nil)
}
