package toolbox

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// FindInFiles returns every line, of the files below dir or of the file
// dir, that contains pattern, a literal string (GET /files/find). Binary
// files are skipped. An agentbox server refuses a pattern with a line
// break (matches are single lines) and does not follow symbolic links.
func (c *Client) FindInFiles(ctx context.Context, dir, pattern string) ([]Match, error) {
	if err := checkPath("path", dir); err != nil {
		return nil, err
	}
	if pattern == "" {
		return nil, fmt.Errorf("toolbox: find: pattern is empty: %w", sandbox.ErrInvalidArgument)
	}
	var out []Match
	q := url.Values{"path": {dir}, "pattern": {pattern}}
	if err := c.doJSON(ctx, http.MethodGet, "/files/find", q, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// SearchFiles returns the paths of the files and folders below dir that
// match the glob pattern (GET /files/search). An agentbox server matches a
// pattern without a slash ("*.go") against names at any depth, and one
// with a slash ("src/**/*.ts") against paths relative to dir, where **
// stands for any number of folders; {a,b} gives alternatives.
func (c *Client) SearchFiles(ctx context.Context, dir, pattern string) ([]string, error) {
	if err := checkPath("path", dir); err != nil {
		return nil, err
	}
	if pattern == "" {
		return nil, fmt.Errorf("toolbox: search: pattern is empty: %w", sandbox.ErrInvalidArgument)
	}
	var r SearchFilesResponse
	q := url.Values{"path": {dir}, "pattern": {pattern}}
	if err := c.doJSON(ctx, http.MethodGet, "/files/search", q, nil, nil, &r); err != nil {
		return nil, err
	}
	return r.Files, nil
}

// ReplaceInFiles replaces every occurrence of pattern, a literal string,
// by newValue in each file (POST /files/replace). The error reports a
// request that failed as a whole (an agentbox server then changed
// nothing); a file that could not be rewritten has Success false and its
// Error in the results, one per file in order.
func (c *Client) ReplaceInFiles(ctx context.Context, files []string, pattern, newValue string) ([]ReplaceResult, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("toolbox: replace: no files given: %w", sandbox.ErrInvalidArgument)
	}
	for i, f := range files {
		if err := checkPath(fmt.Sprintf("replace file %d", i), f); err != nil {
			return nil, err
		}
	}
	if pattern == "" {
		return nil, fmt.Errorf("toolbox: replace: pattern is empty: %w", sandbox.ErrInvalidArgument)
	}
	var out []ReplaceResult
	req := ReplaceRequest{Files: files, Pattern: pattern, NewValue: newValue}
	if err := c.doJSON(ctx, http.MethodPost, "/files/replace", nil, req, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// FilePermissions is what SetFilePermissions changes: each of owner,
// group and mode when given.
type FilePermissions struct {
	// Owner is a user name or a numeric uid; empty leaves it.
	Owner string
	// Group is a group name or a numeric gid; empty leaves it.
	Group string
	// Mode is the new mode when SetMode is true: permission bits, and
	// fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky.
	Mode    fs.FileMode
	SetMode bool
}

// specialModes are the mode bits besides permissions that
// SetFilePermissions sends.
const specialModes = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// SetFilePermissions changes the owner, group and mode of a file or folder
// (POST /files/permissions). A missing file gives an error matching
// sandbox.ErrNotFound.
func (c *Client) SetFilePermissions(ctx context.Context, p string, perm FilePermissions) error {
	if err := checkPath("path", p); err != nil {
		return err
	}
	q := url.Values{"path": {p}}
	if perm.SetMode {
		if extra := perm.Mode &^ (fs.ModePerm | specialModes); extra != 0 {
			return fmt.Errorf("toolbox: permissions of %q: mode %v has bits besides permissions, setuid, setgid and sticky: %w", p, perm.Mode, sandbox.ErrInvalidArgument)
		}
		q.Set("mode", fmt.Sprintf("%04o", octalMode(perm.Mode)))
	}
	for _, v := range []struct{ name, value string }{{"owner", perm.Owner}, {"group", perm.Group}} {
		if strings.ContainsAny(v.value, "\x00:") {
			return fmt.Errorf("toolbox: permissions of %q: invalid %s %q: %w", p, v.name, v.value, sandbox.ErrInvalidArgument)
		}
		if v.value != "" {
			q.Set(v.name, v.value)
		}
	}
	if len(q) == 1 {
		return fmt.Errorf("toolbox: permissions of %q: nothing to change; set Owner, Group or SetMode: %w", p, sandbox.ErrInvalidArgument)
	}
	return c.doJSON(ctx, http.MethodPost, "/files/permissions", q, nil, nil, nil)
}

// octalMode returns m as the octal number chmod(2) takes.
func octalMode(m fs.FileMode) uint32 {
	n := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		n |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	return n
}
