package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// A sandbox made with neither Image nor Snapshot, started by root, has a
// writable root made of the host's system folders (hostRoot): a sandbox's
// root may install packages as in an image, without an image.
//
//   - The root itself is an overlay whose lower layer is a small folder the
//     host makes once per state dir and per state of its /etc (hostBase):
//     the host's top-level links (bin → usr/bin …), empty mount points, a
//     /var skeleton, and a copy of the host's /etc holding only what every
//     user of the host may read. /etc is copied, not ID-mapped: an
//     ID-mapped /etc would give the sandbox's root the host root's
//     /etc/shadow, ssh host keys and other secrets.
//   - Each system folder of hostOverlays (/usr, the top-level folders that
//     are not links to it, dpkg's database) is an overlay of its own whose
//     lower layer is the host's folder, ID-mapped read-only onto the
//     sandbox's ids (the host's root files are the sandbox root's), bound
//     at its place.
//   - /opt is the host's, read-only and not ID-mapped, as before.
//
// Every upper folder is the sandbox's own, on its disk image when it has
// one, so changes persist across stop and start, count against the disk
// limit and never reach the host or another sandbox.

// hostBaseDir is the folder of the state dir that holds the base layers
// of host roots, one per state of the host's /etc.
const hostBaseDir = "hostroot"

// hostOverlayCandidates are the host folders a host root gets an overlay
// of, when they are folders (not links) on this host.
var hostOverlayCandidates = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/var/lib/dpkg"}

// hostTopLinks are the top-level names the base layer mirrors when the
// host has them as symlinks (merged /usr).
var hostTopLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// hostRoot returns the root record of a new sandbox of stateDir with a
// writable root made of the host's system folders: nil when this process
// cannot make one (not root), and the sandbox keeps the host's folders
// read-only.
func hostRoot(stateDir string) (*rootRecord, error) {
	if !writableRootAvailable() {
		return nil, nil
	}
	base, err := hostBase(filepath.Join(stateDir, hostBaseDir))
	if err != nil {
		return nil, fmt.Errorf("writable root from the host's folders: %w", err)
	}
	var overlays []string
	for _, d := range hostOverlayCandidates {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			overlays = append(overlays, d)
		}
	}
	return &rootRecord{Host: true, Layers: []string{base}, Overlays: overlays}, nil
}

// hostBaseFresh is how long the base layer last found for the host's
// /etc is used without looking at /etc again: walking it costs
// milliseconds that a burst of creates need not pay each. A change to the
// host's /etc reaches the sandboxes created that long after it at the
// latest; a sandbox keeps the base it was created with.
const hostBaseFresh = 30 * time.Second

// hostBaseCurrent is the record, in the folder of base layers, of the
// base layer last found for the host's /etc and when.
type hostBaseCurrent struct {
	Base    string    `json:"base"`
	Checked time.Time `json:"checked"`
}

// hostBase returns the base layer of host roots for the host's /etc as it
// is now, making it in dir when no sandbox made it before.
func hostBase(dir string) (string, error) {
	record := filepath.Join(dir, "current.json")
	var cur hostBaseCurrent
	if b, err := os.ReadFile(record); err == nil && json.Unmarshal(b, &cur) == nil && cur.Base != "" && !strings.ContainsAny(cur.Base, "/.") {
		if time.Since(cur.Checked).Abs() < hostBaseFresh {
			if _, err := os.Stat(filepath.Join(dir, cur.Base)); err == nil {
				return filepath.Join(dir, cur.Base), nil
			}
		}
	}
	sum, err := hostEtcDigest()
	if err != nil {
		return "", err
	}
	final, err := makeHostBaseOnce(dir, sum)
	if err != nil {
		return "", err
	}
	// A lost record only costs the next create a walk of /etc.
	_ = atomicfile.WriteJSON(record, hostBaseCurrent{Base: sum, Checked: time.Now()})
	if cur.Base != "" && cur.Base != sum {
		// The host's /etc changed: the bases no sandbox uses go.
		pruneHostBases(filepath.Dir(dir), sum, cur)
	}
	return final, nil
}

// hostBaseKeep is how long after it was last handed out a base layer that
// is no longer the current one is kept even when no sandbox records it: a
// create that got it may not have written its metadata yet.
const hostBaseKeep = 5 * time.Minute

// pruneHostBases removes the base layers of host roots in stateDir that no
// sandbox's metadata records, but current and prev (the base current
// before) while prev was handed out within hostBaseKeep. Base layers are
// copies of /etc, one per state of the host's /etc; a sandbox keeps the
// one it was created with, stopped included, so that its root stays as it
// was. Best effort: a base it cannot tell unused, or remove, stays.
func pruneHostBases(stateDir, current string, prev hostBaseCurrent) {
	dir := filepath.Join(stateDir, hostBaseDir)
	used := map[string]bool{current: true}
	if time.Since(prev.Checked) < hostBaseKeep {
		used[prev.Base] = true
	}
	ents, err := os.ReadDir(filepath.Join(stateDir, sandboxesDir))
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		m, err := readMeta(filepath.Join(stateDir, sandboxesDir, e.Name()))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return // unreadable: it may record any base
			}
			continue // a folder being made or removed: no root yet, or none any more
		}
		if r := m.Root; r != nil && r.Host && len(r.Layers) > 0 && filepath.Dir(r.Layers[0]) == dir {
			used[filepath.Base(r.Layers[0])] = true
		}
	}
	bases, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, b := range bases {
		if !b.IsDir() || strings.HasPrefix(b.Name(), ".") || used[b.Name()] {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, b.Name()))
	}
}

// makeHostBaseOnce returns the base layer named sum in dir, making it
// unless another process did.
func makeHostBaseOnce(dir, sum string) (string, error) {
	final := filepath.Join(dir, sum)
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // gone once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := makeHostBase(tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(final); serr == nil {
			return final, nil // another process made it first
		}
		return "", err
	}
	return final, nil
}

// hostEtcDigest digests what of /etc a base layer copies, and the
// top-level links: a change of either makes a new base layer.
func hostEtcDigest() (string, error) {
	h := sha256.New()
	for _, n := range hostTopLinks {
		t, _ := os.Readlink("/" + n)
		fmt.Fprintf(h, "link %s %s\n", n, t)
	}
	err := walkPublic("/etc", func(p string, fi fs.FileInfo) error {
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(h, "%s %o %d %d %d %d\n", p, fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// walkPublic calls fn for root and everything under it that every user
// may read: folders others may list and enter, files others may read,
// symlinks. Other entries (and folders closed to others, with what they
// hold) are skipped.
func walkPublic(root string, fn func(p string, fi fs.FileInfo) error) error {
	return filepath.Walk(root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // vanished or unreadable: not copied
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			if m.Perm()&0o005 != 0o005 {
				return filepath.SkipDir
			}
		case m.IsRegular():
			if m.Perm()&0o004 == 0 {
				return nil
			}
		case m&fs.ModeSymlink != 0:
		default:
			return nil
		}
		return fn(p, fi)
	})
}

// makeHostBase fills dir with the base layer of host roots.
func makeHostBase(dir string) error {
	for _, d := range []struct {
		name string
		perm os.FileMode
	}{
		{"usr", 0o755}, {"opt", 0o755}, {"home", 0o755}, {"root", 0o700}, {"tmp", 0o1777},
		{"run", 0o755}, {"proc", 0o555}, {"dev", 0o755}, {"sys", 0o555}, {"mnt", 0o755},
		{"srv", 0o755}, {"media", 0o755}, {"var", 0o755}, {"var/lib", 0o755},
		{"var/lib/dpkg", 0o755}, {"var/lib/apt/lists/partial", 0o755}, {"var/cache/apt/archives/partial", 0o755},
		{"var/log", 0o755}, {"var/spool", 0o755}, {"var/mail", 0o2775},
	} {
		p := filepath.Join(dir, d.name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, d.perm); err != nil {
			return err
		}
	}
	for _, n := range hostTopLinks {
		if t, err := os.Readlink("/" + n); err == nil {
			if err := os.Symlink(t, filepath.Join(dir, n)); err != nil {
				return err
			}
		} else if fi, err := os.Lstat("/" + n); err == nil && fi.IsDir() {
			if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
				return err
			}
		}
	}
	return copyPublic("/etc", filepath.Join(dir, "etc"))
}

// copyPublic copies what of the folder src every user may read to dst,
// keeping modes (less set-id bits), owners and times.
func copyPublic(src, dst string) error {
	return walkPublic(src, func(p string, fi fs.FileInfo) error {
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		t := filepath.Join(dst, rel)
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.IsDir():
			if err := os.Mkdir(t, 0o700); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil // vanished
			}
			if err := os.Symlink(target, t); err != nil {
				return err
			}
		default:
			if err := copyFile(p, t); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // vanished
				}
				return err
			}
		}
		if err := os.Lchown(t, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if err := os.Chmod(t, fi.Mode().Perm()|fi.Mode()&fs.ModeSticky); err != nil {
				return err
			}
		}
		ts := []unix.Timespec{unix.NsecToTimespec(fi.ModTime().UnixNano()), unix.NsecToTimespec(fi.ModTime().UnixNano())}
		return unix.UtimesNanoAt(unix.AT_FDCWD, t, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// mountHostRoot mounts, detached, the writable root r made of the host's
// folders, with its upper and work folders in the data folder: the root
// (whose /etc/passwd it first makes name uid 0 user, with home home), and
// the overlay of each host folder of r.Overlays, returned with their
// places in the sandbox. The overlays are made at once: each waits on the
// kernel more than it computes.
func mountHostRoot(r *rootRecord, data, user, home string, own *ownership) (root *os.File, files []*os.File, targets []string, err error) {
	if err := writePasswd(r, data, user, home, own); err != nil {
		return nil, nil, nil, fmt.Errorf("writable root: %w", err)
	}
	mounts := make([]*os.File, 1+len(r.Overlays))
	errs := make([]error, len(mounts))
	var wg sync.WaitGroup
	wg.Go(func() { mounts[0], errs[0] = mountRoot(r, data, own) })
	for i, d := range r.Overlays {
		wg.Go(func() {
			layers := append([]string{d}, r.OverlayLayers[d]...)
			mounts[i+1], errs[i+1] = mountOverlay(layers, filepath.Join(data, rootFS, "host", overlayName(d)), own)
			if errs[i+1] != nil {
				errs[i+1] = fmt.Errorf("writable %s: %w", d, errs[i+1])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, f := range mounts {
			if f != nil {
				f.Close()
			}
		}
		return nil, nil, nil, err
	}
	return mounts[0], mounts[1:], r.Overlays, nil
}

// overlayName names the folder of the upper of the host folder d: its
// path with "/" as "-", e.g. "var-lib-dpkg".
func overlayName(d string) string { return strings.ReplaceAll(strings.Trim(d, "/"), "/", "-") }

// writePasswd makes the sandbox's /etc/passwd, in the upper folder of its
// root, name uid 0 as the sandbox's user (user, with home home) when it
// does not have one yet: the base layer's with a first entry for uid 0.
// The file is the sandbox's own, so tools that add users may change it.
// The upper folder is the sandbox's: its etc is reached without following
// a link, and passwd is made only where nothing is (a file, link, FIFO or
// whiteout the sandbox left there stays as it is). An etc that is not a
// folder there (the sandbox replaced its /etc) leaves naming to it.
func writePasswd(r *rootRecord, data, user, home string, own *ownership) error {
	if user == "" || user == "root" {
		return nil
	}
	host, err := os.ReadFile(filepath.Join(r.Layers[0], "etc", "passwd"))
	if err != nil || snapshotPasswd(r) {
		return nil // a host without one, or a snapshot's: nothing to name
	}
	upperDir := filepath.Join(data, rootFS, "upper")
	if err := os.MkdirAll(upperDir, 0o755); err != nil {
		return err
	}
	upper, err := unix.Open(upperDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", upperDir, err)
	}
	defer unix.Close(upper)
	if err := unix.Fchownat(upper, "", own.owner(), own.owner(), unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("chown %s: %w", upperDir, err)
	}
	made := unix.Mkdirat(upper, "etc", 0o755) == nil
	etc, err := unix.Openat2(upper, "etc", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil // the sandbox's /etc is a link, or deleted: its own
	}
	if err != nil {
		return fmt.Errorf("open the upper /etc: %w", err)
	}
	defer unix.Close(etc)
	if made {
		if err := unix.Fchownat(etc, "", own.owner(), own.owner(), unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("chown the upper /etc: %w", err)
		}
	}
	fd, err := unix.Openat(etc, "passwd", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EEXIST) {
		return nil // the sandbox has one (or a whiteout: it deleted it)
	}
	if err != nil {
		return fmt.Errorf("create the upper /etc/passwd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "passwd")
	_, err = f.Write(passwdNaming(host, user, home))
	if err == nil {
		err = f.Chown(own.owner(), own.owner())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the upper /etc/passwd: %w", err)
	}
	return nil
}

// passwdNaming returns the passwd file host with uid 0 named user, with
// home home, as its first entry, and no other entry of that name.
func passwdNaming(host []byte, user, home string) []byte {
	shell := "/bin/sh"
	var rest []string
	for _, line := range strings.Split(strings.TrimRight(string(host), "\n"), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 7 && f[2] == "0" && shell == "/bin/sh" && f[6] != "" {
			shell = f[6] // root's shell
		}
		if f[0] != user {
			rest = append(rest, line)
		}
	}
	return fmt.Appendf(nil, "%s:x:0:0:%s:%s:%s\n%s\n", user, user, home, shell, strings.Join(rest, "\n"))
}
