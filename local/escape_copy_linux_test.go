package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEscapeSnapshotHardLinks: a sandbox that links one file of its upper
// folder under many names must not make a snapshot's layer (copyShifted,
// which fork's tree copies share) hold one copy per name: the layer keeps
// the links, so it takes the file's size once, as the sandbox's disk did.
func TestEscapeSnapshotHardLinks(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "layer")
	const size, names = 1 << 20, 200
	if err := os.WriteFile(filepath.Join(src, "f"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range names {
		if err := os.Link(filepath.Join(src, "f"), filepath.Join(src, "d", "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyShifted(src, dst, nil); err != nil {
		t.Fatal(err)
	}
	var first unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "f"), &first); err != nil {
		t.Fatal(err)
	}
	if first.Size != size || first.Nlink != names+1 {
		t.Errorf("the copy of f: %d bytes, %d links; want %d bytes, %d links", first.Size, first.Nlink, size, names+1)
	}
	for i := range names {
		var st unix.Stat_t
		p := filepath.Join(dst, "d", "l"+strconv.Itoa(i))
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Ino != first.Ino || st.Dev != first.Dev {
			t.Fatalf("%s is a file of its own (inode %d), not a link to the copy of f (inode %d): the layer grows by a copy per name", p, st.Ino, first.Ino)
		}
	}
}

// TestEscapeCopySwappedFolder: a fork of a running sandbox without a
// freezer copies files in use, so the sandbox can swap a folder for a
// link to a host folder after the copy listed it. The file read next
// must not be the host's: the copy reads each file beneath the tree's
// root without following any link (it fails instead).
func TestEscapeCopySwappedFolder(t *testing.T) {
	src, outside, dst := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "fork")
	const marker = "HOST-SECRET"
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "d", "secret"), []byte("sandbox's own"), 0o644); err != nil {
		t.Fatal(err)
	}
	swapped := false
	swap := func(rel string) bool {
		// The sandbox's move, between the listing of d and the read of
		// d/secret.
		if rel == filepath.Join("d", "secret") && !swapped {
			swapped = true
			if err := os.Rename(filepath.Join(src, "d"), filepath.Join(src, "d.old")); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(outside, filepath.Join(src, "d")); err != nil {
				t.Error(err)
			}
		}
		return false
	}
	tc := &treeCopy{src: src, dst: dst, shift: keepID, xattr: forkXattr, skip: swap}
	err := tc.run()
	if !swapped {
		t.Fatal("control: the swap never ran")
	}
	if b, rerr := os.ReadFile(filepath.Join(dst, "d", "secret")); rerr == nil && strings.Contains(string(b), marker) {
		t.Fatalf("the copy read the host's file through the swapped folder: %q (copy error %v)", b, err)
	}
}
