package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// FileInfo describes a file of the workspace.
type FileInfo struct {
	// Path is the file's absolute path in the sandbox.
	Path  string `json:"path"`
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	IsDir bool   `json:"isDir"`
	// Mode is the file's mode as ls shows it, e.g. "-rw-r--r--".
	Mode    string    `json:"mode,omitempty"`
	ModTime time.Time `json:"modTime,omitzero"`
}

func fileInfo(dir string, fi *toolbox.FileInfo) FileInfo {
	p := fi.Path
	if p == "" || !path.IsAbs(p) {
		p = path.Join(dir, fi.Name)
	}
	out := FileInfo{Path: p, Name: fi.Name, Size: fi.Size, IsDir: fi.IsDir, Mode: fi.Mode}
	if out.Name == "" {
		out.Name = path.Base(p)
	}
	if t, err := time.Parse(time.RFC3339Nano, fi.ModifiedAt); err == nil {
		out.ModTime = t
	}
	return out
}

// DefaultMaxReadFileBytes bounds what ReadFile reads (64 MiB): the
// sandbox decides how large its files are, the host how much of them it
// holds in memory. Stream larger files with OpenFile.
const DefaultMaxReadFileBytes = 64 << 20

// ErrTooLarge is matched by the error of a file larger than the limit of a
// read (a *FileTooLargeError); it is toolbox.ErrTooLarge.
var ErrTooLarge = toolbox.ErrTooLarge

// FileTooLargeError is the error of ReadFile and ReadFileLimit for a file
// larger than the limit. It matches ErrTooLarge.
type FileTooLargeError struct {
	// Path is the file's absolute path.
	Path string
	// Size is the file's size as stat reported it; -1 when the file was
	// small enough then but grew past the limit while it was read.
	Size int64
	// Limit is the limit of the read, in bytes.
	Limit int64
}

func (e *FileTooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("workspace: %s grew past the limit of %s while it was read", e.Path, toolbox.FormatSize(e.Limit))
	}
	return fmt.Sprintf("workspace: %s has %s (%d bytes), more than the limit of %s", e.Path, toolbox.FormatSize(e.Size), e.Size, toolbox.FormatSize(e.Limit))
}

// Is reports whether target is ErrTooLarge.
func (e *FileTooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ReadFile returns the content of the file p (relative to the working
// directory unless absolute), of at most DefaultMaxReadFileBytes: see
// ReadFileLimit. A missing file gives an error matching
// sandbox.ErrNotFound.
func (w *Workspace) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return w.ReadFileLimit(ctx, p, DefaultMaxReadFileBytes)
}

// ReadFileLimit returns the content of the file p if it has at most limit
// bytes. The file's size is asked first, and a larger file is refused
// with a *FileTooLargeError before any of it is read; a file that grows
// meanwhile is refused once limit+1 bytes were read, so the host never
// holds more. A missing file gives an error matching sandbox.ErrNotFound.
func (w *Workspace) ReadFileLimit(ctx context.Context, p string, limit int64) ([]byte, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("workspace: the read limit of %s must be positive, not %d: %w", p, limit, sandbox.ErrInvalidArgument)
	}
	fi, err := w.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	if fi.IsDir {
		return nil, fmt.Errorf("workspace: %s is a directory, not a file: %w", fi.Path, sandbox.ErrInvalidArgument)
	}
	if fi.Size > limit {
		return nil, &FileTooLargeError{Path: fi.Path, Size: fi.Size, Limit: limit}
	}
	rc, err := w.OpenFile(ctx, fi.Path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := readAll(io.LimitReader(rc, limit+1), min(fi.Size, limit)+1)
	if err != nil {
		return nil, fmt.Errorf("workspace: reading %s: %w", fi.Path, err)
	}
	if int64(len(data)) > limit {
		return nil, &FileTooLargeError{Path: fi.Path, Size: -1, Limit: limit}
	}
	return data, nil
}

// readAll is io.ReadAll starting at capacity size (the file's, known),
// so that a file of that size is read into one allocation.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// OpenFile streams the content of the file p; the caller closes the
// reader. A missing file gives an error matching sandbox.ErrNotFound.
func (w *Workspace) OpenFile(ctx context.Context, p string) (io.ReadCloser, error) {
	abs, c, err := w.resolveWithClient(ctx, p)
	if err != nil {
		return nil, err
	}
	rc, err := c.Download(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("workspace: reading %s: %w", abs, err)
	}
	return rc, nil
}

// WriteFile writes data to the file p, replacing its content and creating
// the missing parent directories.
func (w *Workspace) WriteFile(ctx context.Context, p string, data []byte) error {
	abs, c, err := w.resolveWithClient(ctx, p)
	if err != nil {
		return err
	}
	if err := c.Upload(ctx, toolbox.UploadFile{Path: abs, Content: bytes.NewReader(data)}); err != nil {
		return fmt.Errorf("workspace: writing %s: %w", abs, err)
	}
	return nil
}

// ReadDir lists the directory p.
func (w *Workspace) ReadDir(ctx context.Context, p string) ([]FileInfo, error) {
	abs, c, err := w.resolveWithClient(ctx, p)
	if err != nil {
		return nil, err
	}
	list, err := c.ListFiles(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("workspace: listing %s: %w", abs, err)
	}
	out := make([]FileInfo, len(list))
	for i := range list {
		out[i] = fileInfo(abs, &list[i])
	}
	return out, nil
}

// Stat describes the file p. A missing file gives an error matching
// sandbox.ErrNotFound.
func (w *Workspace) Stat(ctx context.Context, p string) (*FileInfo, error) {
	abs, c, err := w.resolveWithClient(ctx, p)
	if err != nil {
		return nil, err
	}
	fi, err := c.GetFileInfo(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("workspace: %s: %w", abs, err)
	}
	out := fileInfo(path.Dir(abs), fi)
	out.Path = abs
	return &out, nil
}

// Remove deletes the file p or, with recursive, the directory tree p.
func (w *Workspace) Remove(ctx context.Context, p string, recursive bool) error {
	abs, c, err := w.resolveWithClient(ctx, p)
	if err != nil {
		return err
	}
	if abs == "/" {
		return fmt.Errorf("workspace: refusing to delete /: %w", sandbox.ErrInvalidArgument)
	}
	if err := c.Delete(ctx, abs, recursive); err != nil {
		return fmt.Errorf("workspace: deleting %s: %w", abs, err)
	}
	return nil
}

// Match is a line of a file that holds the text Find looked for.
type Match = toolbox.Match

// Find returns the lines, of the files below dir (or of the file dir),
// that contain text, a literal string. Binary files are skipped.
func (w *Workspace) Find(ctx context.Context, dir, text string) ([]Match, error) {
	abs, c, err := w.resolveWithClient(ctx, dir)
	if err != nil {
		return nil, err
	}
	m, err := c.FindInFiles(ctx, abs, text)
	if err != nil {
		return nil, fmt.Errorf("workspace: finding %q in %s: %w", text, abs, err)
	}
	return m, nil
}

// Glob returns the paths below dir that match the glob pattern ("*.go"
// at any depth, "src/**/*.ts" relative to dir).
func (w *Workspace) Glob(ctx context.Context, dir, pattern string) ([]string, error) {
	abs, c, err := w.resolveWithClient(ctx, dir)
	if err != nil {
		return nil, err
	}
	m, err := c.SearchFiles(ctx, abs, pattern)
	if err != nil {
		return nil, fmt.Errorf("workspace: searching %s for %q: %w", abs, pattern, err)
	}
	return m, nil
}

func (w *Workspace) resolveWithClient(ctx context.Context, p string) (string, *toolbox.Client, error) {
	abs, err := w.Resolve(ctx, p)
	if err != nil {
		return "", nil, err
	}
	c, err := w.client(ctx)
	if err != nil {
		return "", nil, err
	}
	return abs, c, nil
}
