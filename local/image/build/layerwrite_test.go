package build

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// writeTar writes a plain tar of hdrs, each regular file holding its
// name.
func writeTar(t *testing.T, name string, hdrs []tar.Header) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(h.Name))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAddHostileArchiveStaysInTheLayer extracts archives that a naive
// extractor would let write outside the layer's folder: a symbolic link
// to an absolute host path then a file through it, a relative link
// climbing out, "../" names, a hard link to a host file.
func TestAddHostileArchiveStaysInTheLayer(t *testing.T) {
	requireRoot(t)
	outside := t.TempDir() // a host folder the archive names
	tb := newTestBuild(t)
	ctxDir := t.TempDir()
	writeTar(t, filepath.Join(ctxDir, "evil.tar"), []tar.Header{
		{Name: "abs", Typeflag: tar.TypeSymlink, Linkname: outside},
		{Name: "abs/pwned", Typeflag: tar.TypeReg},
		{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../../../../../../../../" + outside},
		{Name: "up/pwned2", Typeflag: tar.TypeReg},
		{Name: "../../../../" + outside + "/pwned3", Typeflag: tar.TypeReg},
		{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		{Name: "etc/os-name", Typeflag: tar.TypeReg},
	})
	writeFiles(t, ctxDir, map[string]string{"Dockerfile": "FROM base:1\nADD evil.tar /x/\n"})
	img, _ := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"evil"}})
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("the archive wrote %d files into the host folder %s", len(es), outside)
	}
	layer := img.Layers[len(img.Layers)-1]
	// Links are followed inside the image: abs/pwned lands at the image
	// path `outside`/pwned, up/pwned2 at the same place (.. stops at the
	// image's root), etc/os-name over the image's /etc/os-name.
	for _, p := range []string{outside + "/pwned", outside + "/pwned2", "x" + outside + "/pwned3", "etc/os-name"} {
		if _, err := os.Lstat(filepath.Join(layer, p)); err != nil {
			t.Errorf("%s not in the layer: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(layer, "etc/os-name")); string(b) != "etc/os-name" {
		t.Errorf("etc/os-name = %q", b)
	}

	for name, hdrs := range map[string][]tar.Header{
		"hardlink out": {{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}},
		"device":       {{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}},
	} {
		writeTar(t, filepath.Join(ctxDir, "bad.tar"), hdrs)
		writeFiles(t, ctxDir, map[string]string{"Dockerfile": "FROM base:1\nADD bad.tar /y/\n"})
		_, _, err := tb.build(Options{ContextDir: ctxDir})
		if err == nil || !strings.Contains(err.Error(), "Dockerfile line 2: ADD: bad.tar: extract") {
			t.Errorf("%s: error %v, want an extraction error naming line 2", name, err)
		}
	}
}

func TestRootViewWhiteoutsAndOpaqueFolders(t *testing.T) {
	requireRoot(t)
	low, high := t.TempDir(), t.TempDir()
	writeFiles(t, low, map[string]string{"a/keep": "low", "a/gone": "low", "b/inner": "low", "c": "low-c"})
	writeFiles(t, high, map[string]string{"b/new": "high", "c": "high-c"})
	if err := os.Mkdir(filepath.Join(high, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(high, "a/gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(high, "b"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		testenv.Skipf(t, "no trusted xattrs on %s: %v", high, err)
	}
	v := rootView{layers: []string{low, high}}
	for p, want := range map[string]string{"/a/keep": "low", "/b/new": "high", "/c": "high-c"} {
		if b, err := v.readFile(p); string(b) != want {
			t.Errorf("readFile(%s) = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"/a/gone", "/b/inner", "/nothere"} {
		if _, _, err := v.lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("lstat(%s) = %v, want not exist (whiteout, opaque folder, missing)", p, err)
		}
	}
}

func TestCopySourceThroughSymlinkRefused(t *testing.T) {
	tb := newTestBuild(t)
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{"Dockerfile": "FROM base:1\nCOPY out/passwd /p\n", "out": "->/etc"})
	_, _, err := tb.build(Options{ContextDir: ctxDir})
	if err == nil || !strings.Contains(err.Error(), "out is a symbolic link: a source cannot go through one") {
		t.Errorf("error = %v, want a refusal of the symbolic link", err)
	}
	// COPY of a link itself copies the link.
	requireRoot(t)
	writeFiles(t, ctxDir, map[string]string{"Dockerfile2": "FROM base:1\nCOPY out /out\n"})
	img, _, err := tb.build(Options{ContextDir: ctxDir, Dockerfile: filepath.Join(ctxDir, "Dockerfile2")})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(img.Layers[len(img.Layers)-1], "out")); l != "/etc" {
		t.Errorf("COPY of a link: %q, %v", l, err)
	}
}

// TestCopyFolderOverImageLinks copies a root-like folder whose bin/ is a
// real folder over an image where /bin links to usr/bin: the files go to
// /usr/bin, and the layer does not hide the image's link with a folder.
func TestCopyFolderOverImageLinks(t *testing.T) {
	requireRoot(t)
	tb := newTestBuild(t)
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{"rootfs/bin/tool": "tool", "rootfs/etc/conf": "conf", "Dockerfile": "FROM base:1\nCOPY rootfs/ /\n"})
	img, _ := tb.mustBuild(Options{ContextDir: ctxDir})
	layer := img.Layers[len(img.Layers)-1]
	if b, err := os.ReadFile(filepath.Join(layer, "usr/bin/tool")); string(b) != "tool" {
		t.Errorf("usr/bin/tool = %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(layer, "bin")); err == nil {
		t.Errorf("the layer has a /bin (%v) over the image's /bin link", fi.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(layer, "etc/conf")); string(b) != "conf" {
		t.Errorf("etc/conf = %q", b)
	}
}
