//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnpackHostileLayers unpacks layers that try to write, link or point
// outside the layer. A naive unpacker (filepath.Join(dst, name), then
// os.Create, os.Symlink, os.Link) fails every case: it writes host files.
func TestUnpackHostileLayers(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name string
		// entries gets the host folder the layer must not reach (it
		// holds a file "secret").
		entries func(host string) []tarEntry
		// wantErr: the layer is refused, else check runs on the layer.
		wantErr bool
		check   func(t *testing.T, layer, host string)
	}{
		{
			name:    "dot-dot path",
			entries: func(host string) []tarEntry { return []tarEntry{fileE("../host/planted", "x", 0o644, 0, 0)} },
			wantErr: true,
		},
		{
			name: "dot-dot in the middle",
			entries: func(host string) []tarEntry {
				return []tarEntry{dirE("a/", 0o755), fileE("a/../../host/planted", "x", 0o644, 0, 0)}
			},
			wantErr: true,
		},
		{
			name: "absolute symlink then a file through it",
			entries: func(host string) []tarEntry {
				return []tarEntry{dirE(host+"/", 0o755), symlinkE("etc", host), fileE("etc/planted", "x", 0o644, 0, 0)}
			},
			check: func(t *testing.T, layer, host string) {
				// Followed as inside the sandbox: to the layer's own path.
				wantFile(t, filepath.Join(layer, host, "planted"), "x")
				if target, _ := os.Readlink(filepath.Join(layer, "etc")); target != host {
					t.Errorf("etc -> %q; want the symlink kept as %q", target, host)
				}
			},
		},
		{
			name: "dangling absolute symlink then a file through it",
			entries: func(host string) []tarEntry {
				return []tarEntry{symlinkE("etc", host), fileE("etc/planted", "x", 0o644, 0, 0)}
			},
			wantErr: true, // the target is not in the layer: refused, never followed to the host
		},
		{
			name: "relative symlink climbing out then a file through it",
			entries: func(host string) []tarEntry {
				return []tarEntry{dirE(host+"/", 0o755), symlinkE("up", "../../../../../../.."+host), fileE("up/planted", "x", 0o644, 0, 0)}
			},
			check: func(t *testing.T, layer, host string) { wantFile(t, filepath.Join(layer, host, "planted"), "x") },
		},
		{
			name: "symlink to a folder, then a folder and file through it",
			entries: func(host string) []tarEntry {
				return []tarEntry{symlinkE("d", "/"), dirE("d/sub/", 0o755), fileE("d/sub/f", "x", 0o644, 0, 0)}
			},
			check: func(t *testing.T, layer, host string) { wantFile(t, filepath.Join(layer, "sub/f"), "x") },
		},
		{
			name: "symlink replaced by a file",
			entries: func(host string) []tarEntry {
				return []tarEntry{symlinkE("s", filepath.Join(host, "secret")), fileE("s", "replaced", 0o644, 0, 0)}
			},
			check: func(t *testing.T, layer, host string) { wantFile(t, filepath.Join(layer, "s"), "replaced") },
		},
		{
			name:    "hard link out of the layer",
			entries: func(host string) []tarEntry { return []tarEntry{linkE("stolen", "../host/secret")} },
			wantErr: true,
		},
		{
			name:    "hard link to an absolute host path",
			entries: func(host string) []tarEntry { return []tarEntry{linkE("stolen", filepath.Join(host, "secret"))} },
			wantErr: true, // resolved in the layer, where it does not exist
		},
		{
			name: "hard link through a symlink",
			entries: func(host string) []tarEntry {
				return []tarEntry{symlinkE("h", host), linkE("stolen", "h/secret")}
			},
			wantErr: true,
		},
		{
			name: "hard link to a symlink to a host file",
			entries: func(host string) []tarEntry {
				return []tarEntry{symlinkE("s", filepath.Join(host, "secret")), linkE("l", "s")}
			},
			check: func(t *testing.T, layer, host string) {
				// The link is to the symlink itself, which resolves in the sandbox.
				var st unix.Stat_t
				mustLstat(t, filepath.Join(layer, "l"), &st)
				if st.Mode&unix.S_IFMT != unix.S_IFLNK {
					t.Errorf("l has mode %o; want a symlink", st.Mode)
				}
			},
		},
		{
			name: "device nodes",
			entries: func(host string) []tarEntry {
				return []tarEntry{
					{hdr: tar.Header{Name: "mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o666}},
					{hdr: tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8, Devminor: 0, Mode: 0o666}},
					{hdr: tar.Header{Name: "wh", Typeflag: tar.TypeChar, Mode: 0o600}},
				}
			},
			check: func(t *testing.T, layer, host string) {
				for _, n := range []string{"mem", "sda"} {
					if _, err := os.Lstat(filepath.Join(layer, n)); err == nil {
						t.Errorf("device node %s was made; want it skipped", n)
					}
				}
				var st unix.Stat_t
				mustLstat(t, filepath.Join(layer, "wh"), &st)
				if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
					t.Errorf("0/0 device: mode %o rdev %d; want kept as a whiteout", st.Mode, st.Rdev)
				}
			},
		},
		{
			name: "whiteout through a symlink",
			entries: func(host string) []tarEntry {
				return []tarEntry{dirE(host+"/", 0o755), symlinkE("w", host), fileE("w/.wh.secret", "", 0, 0, 0)}
			},
			check: func(t *testing.T, layer, host string) {
				var st unix.Stat_t
				mustLstat(t, filepath.Join(layer, host, "secret"), &st)
				if st.Mode&unix.S_IFMT != unix.S_IFCHR {
					t.Errorf("whiteout has mode %o; want it in the layer", st.Mode)
				}
			},
		},
		{
			name:    "whiteout of the parent",
			entries: func(host string) []tarEntry { return []tarEntry{fileE("a/.wh..", "", 0, 0, 0)} },
			wantErr: true,
		},
		{
			name: "opaque marker through a symlink",
			entries: func(host string) []tarEntry {
				return []tarEntry{dirE(host+"/", 0o755), symlinkE("o", host), fileE("o/.wh..wh..opq", "", 0, 0, 0)}
			},
			check: func(t *testing.T, layer, host string) {
				if v, err := getxattr(filepath.Join(layer, host), opaqueXattr); err != nil || v != "y" {
					t.Errorf("opaque xattr in the layer = %q, %v; want y", v, err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			host := filepath.Join(top, "host")
			layer := filepath.Join(top, "layer")
			must(t, os.Mkdir(host, 0o755))
			must(t, os.Mkdir(layer, 0o755))
			must(t, os.WriteFile(filepath.Join(host, "secret"), []byte("host data"), 0o600))
			_, err := unpack(context.Background(), bytes.NewReader(layerTar(t, tc.entries(host)...)), layer)
			if tc.wantErr {
				if err == nil {
					t.Fatal("the layer was unpacked; want it refused")
				}
				t.Log(err)
			} else if err != nil {
				t.Fatal(err)
			}
			// Whatever happened, the host folder is as it was.
			ents, _ := os.ReadDir(host)
			if len(ents) != 1 || ents[0].Name() != "secret" {
				t.Errorf("host folder holds %v; want only secret", ents)
			}
			var st unix.Stat_t
			mustLstat(t, filepath.Join(host, "secret"), &st)
			if st.Nlink != 1 || st.Mode&unix.S_IFMT != unix.S_IFREG {
				t.Errorf("host secret: %d links, mode %o; want untouched", st.Nlink, st.Mode)
			}
			wantFile(t, filepath.Join(host, "secret"), "host data")
			if _, err := os.Lstat(filepath.Join(top, "planted")); err == nil {
				t.Error("a file was planted beside the layer")
			}
			if tc.check != nil && err == nil {
				tc.check(t, layer, host)
			}
		})
	}
}

func wantFile(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != want {
		t.Errorf("%s = %q, %v; want %q", p, b, err, want)
	}
}

// TestUnpackReplaces checks tar's "a later entry replaces an earlier one"
// across kinds, and folder metadata set after their content.
func TestUnpackReplaces(t *testing.T) {
	requireRoot(t)
	layer := t.TempDir()
	b := layerTar(t,
		dirE("d/", 0o755), fileE("d/f", "1", 0o644, 0, 0),
		fileE("d", "now a file", 0o600, 5, 6), // a file replaces the folder
		fileE("x", "file", 0o644, 0, 0),
		dirE("x/", 0o711), // a folder replaces the file
		fileE("x/in", "in", 0o644, 0, 0),
		tarEntry{hdr: tar.Header{Name: "ro/", Typeflag: tar.TypeDir, Mode: 0o500}},
		fileE("ro/f", "written after its folder became 0500", 0o400, 0, 0),
	)
	if _, err := unpack(context.Background(), bytes.NewReader(b), layer); err != nil {
		t.Fatal(err)
	}
	wantFile(t, filepath.Join(layer, "d"), "now a file")
	wantFile(t, filepath.Join(layer, "x/in"), "in")
	var st unix.Stat_t
	mustLstat(t, filepath.Join(layer, "d"), &st)
	if st.Uid != 5 || st.Gid != 6 || st.Mode&0o7777 != 0o600 {
		t.Errorf("d: %d:%d %o; want 5:6 600", st.Uid, st.Gid, st.Mode&0o7777)
	}
	mustLstat(t, filepath.Join(layer, "x"), &st)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o711 {
		t.Errorf("x: mode %o; want a 711 folder", st.Mode)
	}
	mustLstat(t, filepath.Join(layer, "ro"), &st)
	if st.Mtim.Sec != 1700000000 {
		t.Errorf("ro's mtime is %d; want the tar's 1700000000 (set after its content)", st.Mtim.Sec)
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestUnpackBomb: a layer holding a file far larger than the store's disk
// (a decompression bomb: its blob would be a few kilobytes) is refused
// with ErrNoSpace before anything of it is written, on a 64 MiB disk.
func TestUnpackBomb(t *testing.T) {
	requireRoot(t)
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(disk, unix.MNT_DETACH) })
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		const size = 1 << 40 // 1 TiB of zeros
		if err := tw.WriteHeader(&tar.Header{Name: "bomb", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			pw.CloseWithError(err)
			return
		}
		_, err := io.CopyN(tw, zeros{}, size)
		pw.CloseWithError(err)
	}()
	_, err := unpack(context.Background(), pr, disk)
	pr.Close()
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("unpack of a 1 TiB file onto 64 MiB: %v, want ErrNoSpace", err)
	}
	if _, err := os.Lstat(filepath.Join(disk, "bomb")); err == nil {
		t.Error("the bomb's file was created")
	}
}
