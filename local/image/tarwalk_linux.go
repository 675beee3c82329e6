package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// errDevice reports a device node where a layer may hold none.
var errDevice = errors.New("device node in a layer")

// writeTar writes the folder dir as an OCI layer tar stream to w: entries
// in lexical order, numeric owners, modification times to the nanosecond
// (no access or change times, which reading changes), user.* and
// security.capability xattrs, hard links as links, overlayfs whiteouts (0/0
// character devices, trusted.overlay.opaque folders) as `.wh.` entries.
// The same folder always gives the same stream, so its digest names the
// layer. It returns the bytes of the files. Other device nodes and sockets are skipped, or refused when
// strict is set.
func writeTar(ctx context.Context, dir string, w io.Writer, strict bool) (size int64, err error) {
	tw := &tarWalk{tw: tar.NewWriter(w), links: map[[2]uint64]string{}, buf: make([]byte, 256<<10), strict: strict}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		return tw.add(p, filepath.ToSlash(rel))
	})
	if err != nil {
		return 0, err
	}
	return tw.size, tw.tw.Close()
}

// tarWalk is writeTar's state: the archive, the first names of files
// with several links, and the bytes of regular files so far.
type tarWalk struct {
	tw     *tar.Writer
	links  map[[2]uint64]string
	buf    []byte
	strict bool
	size   int64
}

// add writes the file p, named rel in the archive.
func (t *tarWalk) add(p, rel string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	hdr := &tar.Header{
		Name:    rel,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()),
		Format:  tar.FormatPAX,
	}
	tw := t.tw
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
		if err := addXattrs(p, hdr); err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if opaque(p) {
			return tw.WriteHeader(&tar.Header{Name: rel + "/" + whiteoutOpaque, Typeflag: tar.TypeReg, Format: tar.FormatPAX, ModTime: time.Unix(0, 0)})
		}
		return nil
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return tw.WriteHeader(hdr)
	case unix.S_IFREG:
		return t.addRegular(p, rel, hdr, &st)
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
		return tw.WriteHeader(hdr)
	case unix.S_IFCHR:
		if st.Rdev == 0 { // an overlayfs whiteout
			dirName, base := path.Split(rel)
			return tw.WriteHeader(&tar.Header{Name: dirName + whiteoutPrefix + base, Typeflag: tar.TypeReg, Format: tar.FormatPAX, ModTime: time.Unix(0, 0)})
		}
	}
	if t.strict {
		return fmt.Errorf("%w: %s", errDevice, rel)
	}
	return nil // device nodes and sockets are skipped
}

// addRegular writes the regular file p (stat st), or a hard link to the
// first name it was written under.
func (t *tarWalk) addRegular(p, rel string, hdr *tar.Header, st *unix.Stat_t) error {
	key := [2]uint64{st.Dev, st.Ino}
	if first, ok := t.links[key]; ok && st.Nlink > 1 {
		hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
		return t.tw.WriteHeader(hdr)
	}
	if st.Nlink > 1 {
		t.links[key] = rel
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	t.size += st.Size
	if err := addXattrs(p, hdr); err != nil {
		return err
	}
	return copyFile(t.tw, hdr, p, t.buf)
}

func copyFile(tw *tar.Writer, hdr *tar.Header, p string, buf []byte) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyBuffer(tw, io.LimitReader(f, hdr.Size), buf); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	return nil
}

// opaque reports whether folder p is an opaque overlayfs folder.
func opaque(p string) bool {
	var b [1]byte
	n, err := unix.Lgetxattr(p, opaqueXattr, b[:])
	return err == nil && n == 1 && b[0] == 'y'
}

// addXattrs records the kept xattrs of p (see keptXattr) in hdr.
func addXattrs(p string, hdr *tar.Header) error {
	sz, err := unix.Llistxattr(p, nil)
	if err != nil || sz == 0 {
		return nil // no xattrs, or a file system without them
	}
	list := make([]byte, sz)
	if sz, err = unix.Llistxattr(p, list); err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(list[:sz]), "\x00"), "\x00") {
		if !keptXattr(name) {
			continue
		}
		n, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return fmt.Errorf("read xattr %s of %s: %w", name, p, err)
		}
		v := make([]byte, n)
		n, err = unix.Lgetxattr(p, name, v)
		if err != nil {
			return fmt.Errorf("read xattr %s of %s: %w", name, p, err)
		}
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords[paxXattr+name] = string(v[:n])
	}
	return nil
}
