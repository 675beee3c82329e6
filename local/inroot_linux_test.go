package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openDir opens dir as a root for the helpers of inroot_linux.go.
func openDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestMkdirAllInRoot: folders made through links a sandbox planted (an
// absolute link to a host folder, .. chains, a link through /proc) land
// inside the root, never in the host folder.
func TestMkdirAllInRoot(t *testing.T) {
	host, root := t.TempDir(), t.TempDir()
	for name, target := range map[string]string{
		"abs":   host,
		"dots":  "../../../../../../../../" + strings.TrimPrefix(host, "/"),
		"magic": "/proc/self/root" + host,
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	rfd := openDir(t, root)
	for _, p := range []string{"/abs/a", "dots/b", "/magic/c", "/a/b/c"} {
		fd, made, err := mkdirAllInRoot(rfd, p, 0o755, -1, -1)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		target, _ := os.Readlink(fdPath(fd))
		unix.Close(fd)
		if !made || !strings.HasPrefix(target, root+"/") {
			t.Errorf("%s: made %v at %s, want a new folder inside %s", p, made, target, root)
		}
	}
	if names, _ := os.ReadDir(host); len(names) > 0 {
		t.Errorf("%s made in the host folder", names[0].Name())
	}
}

// TestReadFileInRoot: a file read inside a root is never a FIFO (no
// wait), and a link to a host file reads the root's own file of that
// path, or nothing.
func TestReadFileInRoot(t *testing.T) {
	host, root := t.TempDir(), t.TempDir()
	secret := filepath.Join(host, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	rfd := openDir(t, root)
	if _, err := readFileInRoot(rfd, "fifo", 100); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v, want an error saying it is not a regular file", err)
	}
	if b, err := readFileInRoot(rfd, "link", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a link to a host file: %q, %v; want not found", b, err)
	}
}

// TestCopyShiftedKeepsHoles: copying an upper folder into a layer keeps a
// sparse file of 64 GiB apparent size sparse (its few bytes of data
// copied, its holes left holes), and leaves a FIFO out without opening it.
func TestCopyShiftedKeepsHoles(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "layer")
	const size = 64 << 30
	f, err := os.Create(filepath.Join(src, "big"))
	if err != nil {
		t.Fatal(err)
	}
	for off, b := range map[int64]string{0: "head", 8 << 30: "middle", size - 4: "tail"} {
		if _, err := f.WriteAt([]byte(b), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyShifted(src, dst, nil); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "big"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 1<<20 {
		t.Errorf("the copy: %d bytes, %d allocated; want %d, at most 1 MiB allocated", st.Size, st.Blocks*512, int64(size))
	}
	got, err := os.Open(filepath.Join(dst, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	for off, want := range map[int64]string{0: "head", 8 << 30: "middle", size - 4: "tail", 4 << 30: "\x00\x00"} {
		buf := make([]byte, len(want))
		if _, err := got.ReadAt(buf, off); err != nil || string(buf) != want {
			t.Errorf("the copy at %d: %q (%v), want %q", off, buf, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the FIFO: %v, want it left out", err)
	}
}
