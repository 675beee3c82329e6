package daemon

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
)

// Every path a client names is resolved inside the server's root
// (Options.Root, "/" by default) by an fsRoot: the sandbox's files are
// the sandbox's to shape, so a symbolic link, a ".." or a /proc magic link
// planted by a command must never lead the server (the sandbox's PID 1,
// which may hold descriptors the sandbox's processes do not) to a file
// outside the sandbox. On Linux (root*_linux.go) every path is opened with
// openat2 relative to a descriptor of the root, with RESOLVE_IN_ROOT (an
// absolute link or a ".." resolves as if the root were "/") and
// RESOLVE_NO_MAGICLINKS (/proc/*/fd/N, /proc/*/root, /proc/*/cwd are
// refused, ELOOP); an operation on a last name (unlink, rename, mkdir,
// stat without following) opens the parent so and acts on the name with
// the *at system calls without following it; walks over a tree go from
// descriptor to descriptor, never through joined path strings.
//
// Paths in requests and answers stay as the sandbox sees them: "/a/b" is
// the root's a/b.

// errMagicLink is what a path through a /proc magic link or a symbolic
// link loop gives (ELOOP from openat2).
var errMagicLink = errors.New("it goes through a /proc magic link (/proc/<pid>/fd, root or cwd), which the server does not follow, or through a loop of symbolic links")

// errNoOpenat2 is what every path gives on a Linux kernel without openat2
// (before 5.6): the server fails closed rather than resolve paths in a
// way that could leave its root.
var errNoOpenat2 = errors.New("the kernel has no openat2 (Linux 5.6 or later is needed), so the server cannot resolve paths safely inside its root and refuses")

// splitPath splits the cleaned absolute sandbox path p into its folder
// and its last name; the root itself has no last name ("").
func splitPath(p string) (dir, name string) {
	if p == "/" {
		return "/", ""
	}
	return path.Dir(p), path.Base(p)
}

// A walkEntry is one entry met by fsRoot.walk.
type walkEntry struct {
	path  string      // as the sandbox sees it
	info  fs.FileInfo // not following a symbolic link
	depth int         // 1 for the entries of the walked folder
	// open opens the entry for reading without following it (regular
	// files; a FIFO opens without waiting).
	open func() (*os.File, error)
}

// walkOptions says how fsRoot.walk goes.
type walkOptions struct {
	maxDepth   int  // 0: no limit
	skipPseudo bool // do not descend into /proc, /sys … met on the way
}

// dirNames returns up to n (n <= 0: all) names of the open folder d; the
// end of the folder is no error.
func dirNames(d *os.File, n int) ([]string, error) {
	names, err := d.Readdirnames(n)
	if err == io.EOF {
		err = nil
	}
	return names, err
}
