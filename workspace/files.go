package workspace

import (
	"bytes"
	"context"
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

// ReadFile returns the content of the file p (relative to the working
// directory unless absolute). A missing file gives an error matching
// sandbox.ErrNotFound.
func (w *Workspace) ReadFile(ctx context.Context, p string) ([]byte, error) {
	rc, err := w.OpenFile(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("workspace: reading %s: %w", p, err)
	}
	return data, nil
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
