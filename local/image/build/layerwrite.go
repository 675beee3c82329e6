package build

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// layerWriter writes files into a new layer over an image's layers. Image
// paths are resolved through the layers and the new layer together, so a
// symbolic link of the image (/bin → usr/bin) or one written earlier is
// followed inside the image's root, never on the host, and nothing is
// written outside the layer's folder.
type layerWriter struct {
	dir  string   // the new layer's folder
	view rootView // the image's layers with dir on top
	uid  int      // owner of new folders and copied files
	gid  int
}

func newLayerWriter(dir string, lower []string, uid, gid int) *layerWriter {
	return &layerWriter{dir: dir, view: rootView{layers: append(append([]string(nil), lower...), dir)}, uid: uid, gid: gid}
}

// host is the path in the layer's folder of the resolved image path p.
func (w *layerWriter) host(p string) string { return filepath.Join(w.dir, path.Clean("/"+p)) }

// place resolves the image path p for writing: its folders resolved and
// made in the layer. It returns the resolved path.
func (w *layerWriter) place(p string) (string, error) {
	parent, err := w.view.resolve(path.Dir(path.Clean("/"+p)), true)
	if err != nil {
		return "", err
	}
	if err := w.mkdirs(parent); err != nil {
		return "", err
	}
	return path.Join(parent, path.Base(path.Clean("/"+p))), nil
}

// mkdirs makes the resolved image folder p and its parents in the layer:
// a folder the image already has is made with its mode and owner (so the
// layer does not change them), a new one 0755 owned by the writer's ids.
func (w *layerWriter) mkdirs(p string) error {
	cur := "/"
	for _, part := range splitPath(p) {
		cur = path.Join(cur, part)
		h := w.host(cur)
		if fi, err := os.Lstat(h); err == nil && fi.IsDir() {
			continue
		}
		mode, uid, gid := fs.FileMode(0o755), w.uid, w.gid
		if _, fi, err := w.view.lstat(cur); err == nil && fi.IsDir() {
			st := fi.Sys().(*syscall.Stat_t)
			mode, uid, gid = fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid|fs.ModeSetuid), int(st.Uid), int(st.Gid)
		}
		if err := w.mkdir(h, mode, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// mkdir makes (or updates) the folder h of the layer.
func (w *layerWriter) mkdir(h string, mode fs.FileMode, uid, gid int) error {
	if fi, err := os.Lstat(h); err == nil && !fi.IsDir() {
		if err := os.Remove(h); err != nil {
			return err
		}
	}
	if err := os.Mkdir(h, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return setAttrs(h, mode, uid, gid, time.Time{})
}

// setAttrs sets the owner, then the mode (chown clears set-id bits), then
// the modification time (when not zero) of h, a file of the layer.
func setAttrs(h string, mode fs.FileMode, uid, gid int, mtime time.Time) error {
	if err := os.Lchown(h, uid, gid); err != nil {
		return fmt.Errorf("set the owner of %s (building needs root): %w", h, err)
	}
	if mode&fs.ModeSymlink == 0 {
		if err := os.Chmod(h, mode&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid|fs.ModeSetuid)); err != nil {
			return err
		}
	}
	if mtime.IsZero() {
		return nil
	}
	t := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, h, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
}

// clearPath removes what the layer has at h (from earlier in the same step),
// unless both it and the new file are folders.
func clearPath(h string, dir bool) error {
	fi, err := os.Lstat(h)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.IsDir() && dir {
		return nil
	}
	if err != nil {
		return err
	}
	return os.RemoveAll(h)
}

// fileSpec is a file to write into the layer.
type fileSpec struct {
	mode     fs.FileMode
	uid, gid int
	mtime    time.Time
	link     string    // symbolic link target
	content  io.Reader // regular file content
}

// write writes the file f at image path p. A folder where the image has
// a symbolic link to one goes to the link's target, as with Docker (a
// /bin folder copied over a merged /usr goes into /usr/bin).
func (w *layerWriter) write(p string, f fileSpec) error {
	var rp string
	var err error
	if f.mode.IsDir() {
		if rp, err = w.view.resolve(p, true); err == nil {
			err = w.mkdirs(path.Dir(rp))
		}
	} else {
		rp, err = w.place(p)
	}
	if err != nil {
		return err
	}
	h := w.host(rp)
	if err := clearPath(h, f.mode.IsDir()); err != nil {
		return err
	}
	switch {
	case f.mode.IsDir():
		if err := os.Mkdir(h, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case f.mode&fs.ModeSymlink != 0:
		if err := os.Symlink(f.link, h); err != nil {
			return err
		}
	case f.mode&fs.ModeNamedPipe != 0:
		if err := unix.Mkfifo(h, 0o600); err != nil {
			return fmt.Errorf("make fifo %s: %w", p, err)
		}
	case f.mode.IsRegular():
		if err := writeContent(h, f.content); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s is a %v: device nodes and sockets cannot be added to an image", p, f.mode.Type())
	}
	return setAttrs(h, f.mode, f.uid, f.gid, f.mtime)
}

// writeContent creates the file h with the content r.
func writeContent(h string, r io.Reader) error {
	out, err := os.OpenFile(h, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", h, err)
	}
	return out.Close()
}

// copySource writes one COPY or ADD source into the layer at the image
// path dest (a folder when destDir).
func (w *layerWriter) copySource(ctx context.Context, s source, dest string, destDir bool, chmod *uint32) error {
	if s.Archive {
		return w.extract(ctx, s.host, dest)
	}
	if !s.Dir {
		if !destDir {
			if r, err := w.view.resolve(dest, true); err == nil {
				if _, fi, err := w.view.lstat(r); err == nil && fi.IsDir() {
					destDir = true
				}
			}
		}
		if destDir {
			dest = path.Join(dest, path.Base(s.Name))
		}
		return w.copyEntry(s.Entries[0], dest, chmod)
	}
	if err := w.destFolder(dest); err != nil {
		return err
	}
	for _, e := range s.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.copyEntry(e, path.Join(dest, e.Rel), chmod); err != nil {
			return err
		}
	}
	return nil
}

// destFolder makes the destination folder of a folder source or archive,
// unless the image has it.
func (w *layerWriter) destFolder(dest string) error {
	r, err := w.view.resolve(dest, true)
	if err != nil {
		return err
	}
	return w.mkdirs(r)
}

// copyEntry copies one file of the build context to the image path p.
func (w *layerWriter) copyEntry(e entry, p string, chmod *uint32) error {
	fi, err := os.Lstat(e.host)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != e.Mode.Type() {
		return fmt.Errorf("%s changed during the build", e.host)
	}
	f := fileSpec{mode: fi.Mode(), uid: w.uid, gid: w.gid, mtime: fi.ModTime()}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if f.link, err = os.Readlink(e.host); err != nil {
			return err
		}
	}
	if chmod != nil && fi.Mode()&fs.ModeSymlink == 0 {
		f.mode = fi.Mode().Type() | fs.FileMode(*chmod)&fs.ModePerm
	}
	if fi.Mode().IsRegular() {
		in, err := os.Open(e.host)
		if err != nil {
			return err
		}
		defer in.Close()
		f.content = in
	}
	return w.write(p, f)
}

// extract writes the tar archive at host (plain, gzip or bzip2) into the
// image folder dest, with the archive's owners and modes. Entries are
// taken relative to dest ("../" cannot leave it), symbolic links are
// followed inside the image, a hard link must point to an earlier entry,
// device nodes are refused.
func (w *layerWriter) extract(ctx context.Context, host, dest string) error {
	f, err := os.Open(host)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := decompress(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("extract %s: %w", host, err)
	}
	if err := w.destFolder(dest); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extract %s: %w", host, err)
		}
		p := path.Join(dest, path.Clean("/"+hdr.Name))
		if hdr.Typeflag == tar.TypeLink {
			if err := w.hardLink(path.Join(dest, path.Clean("/"+hdr.Linkname)), p); err != nil {
				return fmt.Errorf("extract %s: %s: %w", host, hdr.Name, err)
			}
			continue
		}
		fi := hdr.FileInfo()
		spec := fileSpec{mode: fi.Mode(), uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime, link: hdr.Linkname, content: tr}
		if err := w.write(p, spec); err != nil {
			return fmt.Errorf("extract %s: %s: %w", host, hdr.Name, err)
		}
	}
}

// hardLink links the image path p to target, a file this layer has.
func (w *layerWriter) hardLink(target, p string) error {
	rt, err := w.view.resolve(target, false)
	if err != nil {
		return err
	}
	th := w.host(rt)
	if fi, err := os.Lstat(th); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("hard link to %s, which is not a file the archive made before it", target)
	}
	rp, err := w.place(p)
	if err != nil {
		return err
	}
	h := w.host(rp)
	if err := clearPath(h, false); err != nil {
		return err
	}
	return os.Link(th, h)
}

// splitPath splits a clean absolute path into its names.
func splitPath(p string) []string {
	var out []string
	for p = path.Clean("/" + p); p != "/"; p = path.Dir(p) {
		out = append([]string{path.Base(p)}, out...)
	}
	return out
}
