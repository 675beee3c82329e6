package build

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// buildContext is the folder COPY and ADD take files from.
type buildContext struct {
	dir    string
	ignore *ignorer
	sums   map[string]string // host path → content digest, computed once
	all    []string          // every kept path (relative, slash), for globs; nil until needed
}

// openContext opens the build context dir and reads its .dockerignore.
func openContext(dir string) (*buildContext, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("build context %s is not a folder", abs)
	}
	ig, err := readIgnore(abs)
	if err != nil {
		return nil, err
	}
	return &buildContext{dir: abs, ignore: ig, sums: map[string]string{}}, nil
}

// entry is one file of a COPY or ADD source.
type entry struct {
	Rel  string      `json:"rel"` // slash path inside a folder source; "" for the source itself
	Mode fs.FileMode `json:"mode"`
	Link string      `json:"link,omitempty"` // a symbolic link's target
	Sum  string      `json:"sum,omitempty"`  // a regular file's content digest
	host string
}

// source is one matched source of a COPY or ADD.
type source struct {
	Name    string  `json:"name"` // relative slash path in the context
	Dir     bool    `json:"dir"`
	Archive bool    `json:"archive,omitempty"` // ADD extracts it
	Entries []entry `json:"entries"`
	host    string
}

// sources resolves the sources of a COPY or ADD: paths relative to the
// context, or glob patterns, that must match files .dockerignore keeps.
func (c *buildContext) sources(names []string) ([]source, error) {
	var out []source
	for _, n := range names {
		rel := path.Clean("/" + filepath.ToSlash(n))[1:]
		if n == "" || strings.HasPrefix(path.Clean(filepath.ToSlash(n)), "../") || path.Clean(filepath.ToSlash(n)) == ".." {
			return nil, fmt.Errorf("source %q is outside the build context %s", n, c.dir)
		}
		matches := []string{rel}
		if strings.ContainsAny(rel, "*?[") {
			all, err := c.allPaths()
			if err != nil {
				return nil, err
			}
			matches = nil
			for _, p := range all {
				if ok, err := path.Match(rel, p); err != nil {
					return nil, fmt.Errorf("source pattern %q: %w", n, err)
				} else if ok {
					matches = append(matches, p)
				}
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("source %q: no file of the build context %s matches (or .dockerignore excludes them)", n, c.dir)
			}
		}
		for _, m := range matches {
			s, err := c.source(m)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// source reads one source path of the context.
func (c *buildContext) source(rel string) (source, error) {
	host, fi, err := c.lstat(rel)
	if err != nil {
		return source{}, err
	}
	s := source{Name: rel, host: host}
	if rel == "" {
		s.Name = "."
	}
	if !fi.IsDir() {
		e, err := c.entry(host, "", fi)
		if err != nil {
			return source{}, err
		}
		s.Entries = []entry{e}
		return s, nil
	}
	s.Dir = true
	err = c.walk(host, rel, func(p, inside string, d fs.DirEntry) error {
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e, err := c.entry(p, inside, fi)
		if err != nil {
			return err
		}
		s.Entries = append(s.Entries, e)
		return nil
	})
	if err != nil {
		return source{}, fmt.Errorf("read %s: %w", host, err)
	}
	return s, nil
}

// walk calls fn for each file below the folder host, rel in the context,
// that .dockerignore keeps, with its path relative to host.
func (c *buildContext) walk(host, rel string, fn func(p, inside string, d fs.DirEntry) error) error {
	return filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == host {
			return err
		}
		inside := filepath.ToSlash(p[len(host)+1:])
		if c.ignore.ignored(path.Join(rel, inside)) {
			if d.IsDir() && c.ignore.prunes() {
				return fs.SkipDir
			}
			return nil // a folder: "!" lines may keep something inside
		}
		return fn(p, inside, d)
	})
}

// lstat finds rel in the context: no folder on the way may be a symbolic
// link (it could lead outside the context), and .dockerignore must keep it.
func (c *buildContext) lstat(rel string) (string, fs.FileInfo, error) {
	notFound := func() error {
		return fmt.Errorf("source %q: no such file in the build context %s (or .dockerignore excludes it): %w", rel, c.dir, fs.ErrNotExist)
	}
	if rel != "" && c.ignore.ignored(rel) {
		return "", nil, notFound()
	}
	host := c.dir
	var fi fs.FileInfo
	var err error
	if fi, err = os.Lstat(host); err != nil {
		return "", nil, err
	}
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		if part == "" {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", nil, fmt.Errorf("source %q: %s is a symbolic link: a source cannot go through one", rel, strings.Join(parts[:i], "/"))
		}
		host = filepath.Join(host, part)
		if fi, err = os.Lstat(host); errors.Is(err, fs.ErrNotExist) {
			return "", nil, notFound()
		} else if err != nil {
			return "", nil, err
		}
	}
	return host, fi, nil
}

// entry describes the file at host for a cache key.
func (c *buildContext) entry(host, rel string, fi fs.FileInfo) (entry, error) {
	e := entry{Rel: rel, Mode: fi.Mode(), host: host}
	switch {
	case fi.Mode().IsRegular():
		sum, err := c.sum(host)
		if err != nil {
			return entry{}, err
		}
		e.Sum = sum
	case fi.Mode()&fs.ModeSymlink != 0:
		l, err := os.Readlink(host)
		if err != nil {
			return entry{}, err
		}
		e.Link = l
	case fi.IsDir():
	default:
		return entry{}, fmt.Errorf("%s is a %v: only files, folders and symbolic links can be copied", host, fi.Mode().Type())
	}
	return e, nil
}

// sum returns the sha256 digest of the file at host.
func (c *buildContext) sum(host string) (string, error) {
	if s, ok := c.sums[host]; ok {
		return s, nil
	}
	f, err := os.Open(host)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", host, err)
	}
	s := hex.EncodeToString(h.Sum(nil))
	c.sums[host] = s
	return s, nil
}

// allPaths lists every path of the context that .dockerignore keeps.
func (c *buildContext) allPaths() ([]string, error) {
	if c.all != nil {
		return c.all, nil
	}
	all := []string{}
	err := c.walk(c.dir, "", func(_, rel string, _ fs.DirEntry) error {
		all = append(all, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read build context: %w", err)
	}
	slices.Sort(all)
	c.all = all
	return all, nil
}
