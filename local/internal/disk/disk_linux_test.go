package disk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestCopyDataKeepsHoles: a sparse file's data is copied byte for byte,
// its apparent size kept, and its holes stay holes.
func TestCopyDataKeepsHoles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	in, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	const size = 16 << 20
	chunks := map[int64][]byte{0: []byte("head"), 8 << 20: bytes.Repeat([]byte{'x'}, 8192), size - 5: []byte("tail!")}
	for off, b := range chunks {
		if _, err := in.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(dir, "dst")
	if err := copySparse(dst, src); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(src)
	if !bytes.Equal(out, want) {
		t.Fatal("the copy's bytes differ from the source's")
	}
	var st unix.Stat_t
	if err := unix.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 4<<20 {
		t.Errorf("copy: size %d (want %d), %d bytes allocated (want the data's, well under 4 MiB)", st.Size, size, st.Blocks*512)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
		t.Errorf("copy mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestImageLifecycle: a template is formatted once per size, an image
// copied from it mounts as ext4 that takes files, and closing the mount
// releases the loop device.
func TestImageLifecycle(t *testing.T) {
	err := Available()
	testenv.Need(t, err == nil && os.Geteuid() == 0, fmt.Sprintf("needs root, loop devices, ext4 and mkfs.ext4: %v", err))
	dir := t.TempDir()
	tpl, err := Template(dir, 64)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(tpl)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Template(dir, 64); err != nil || again != tpl {
		t.Fatalf("Template again: %q, %v; want %q", again, err, tpl)
	}
	if fi2, _ := os.Stat(tpl); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Error("the template was formatted twice")
	}
	img := filepath.Join(dir, "disk.img")
	if err := Create(img, tpl); err != nil {
		t.Fatal(err)
	}
	if n := SizeMB(img); n != 64 {
		t.Errorf("SizeMB = %d, want 64", n)
	}
	root, err := Mount(img)
	if err != nil {
		t.Fatal(err)
	}
	if LoopOf(img) == "" {
		t.Error("a mounted image has no loop device")
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(root.Fd()), &fs); err != nil || fs.Type != unix.EXT4_SUPER_MAGIC {
		t.Errorf("the mount is not ext4: type %#x, %v", fs.Type, err)
	}
	if err := os.WriteFile(filepath.Join("/proc/self/fd", strconv.Itoa(int(root.Fd())), "f"), []byte("x"), 0o600); err != nil {
		t.Errorf("write on the image: %v", err)
	}
	root.Close()
	if err := WaitReleased(context.Background(), img); err != nil {
		t.Fatal(err)
	}
	if dev := LoopOf(img); dev != "" {
		t.Errorf("released image still on %s", dev)
	}
}
