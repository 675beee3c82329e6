package build

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// rootView reads the file tree an image's layers make, as overlayfs
// shows it: the highest layer having a path wins, a whiteout (a 0/0
// character device) hides the path below it, an opaque folder (the
// trusted.overlay.opaque xattr) hides what lower layers have inside it.
type rootView struct {
	layers []string // lowest first
}

// lstat finds the image path p (absolute, its folders already resolved)
// and returns the file of the layer that shows it. A missing path is an
// error matching fs.ErrNotExist.
func (v rootView) lstat(p string) (string, fs.FileInfo, error) {
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	var parts []string
	if rel != "" {
		parts = strings.Split(rel, "/")
	}
	notExist := fmt.Errorf("%s: %w", path.Join("/", rel), fs.ErrNotExist)
layers:
	for i := len(v.layers) - 1; i >= 0; i-- {
		opaque := false
		dir := v.layers[i]
		for _, part := range parts[:max(len(parts)-1, 0)] {
			dir = filepath.Join(dir, part)
			fi, err := os.Lstat(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue layers // this layer says nothing about p
			} else if err != nil {
				return "", nil, err
			}
			if !fi.IsDir() {
				return "", nil, notExist // a whiteout or file hides what is below
			}
			opaque = opaque || isOpaque(dir)
		}
		host := filepath.Join(v.layers[i], rel)
		fi, err := os.Lstat(host)
		switch {
		case err == nil && isWhiteout(fi):
			return "", nil, notExist
		case err == nil:
			return host, fi, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", nil, err
		case opaque:
			return "", nil, notExist
		}
	}
	return "", nil, notExist
}

// resolve follows the symbolic links of the image path p, within the
// image's root (as chroot would): every folder of the result is a real
// folder of the image or missing, and so is its last element when
// followLast is set.
func (v rootView) resolve(p string, followLast bool) (string, error) {
	todo := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		part := todo[0]
		todo = todo[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, part)
		if len(todo) == 0 && !followLast {
			return next, nil
		}
		host, fi, err := v.lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			cur = next
			continue
		} else if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links in the image", p)
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}

// readFile reads the image file p, following symbolic links.
func (v rootView) readFile(p string) ([]byte, error) {
	r, err := v.resolve(p, true)
	if err != nil {
		return nil, err
	}
	host, fi, err := v.lstat(r)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file in the image", p)
	}
	return os.ReadFile(host)
}

// isWhiteout reports whether fi is an overlayfs whiteout.
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaque reports whether the folder dir hides the lower layers' content.
func isOpaque(dir string) bool {
	var b [1]byte
	n, err := unix.Lgetxattr(dir, "trusted.overlay.opaque", b[:])
	return err == nil && n == 1 && b[0] == 'y'
}
