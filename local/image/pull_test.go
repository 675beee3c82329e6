//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
)

// twoLayers is an image whose second layer deletes and hides what the
// first made: a whiteout, an opaque folder, and files of every kind.
func twoLayers(t testing.TB) v1.Image {
	t.Helper()
	base := layerTar(t,
		dirE("etc/", 0o755),
		fileE("etc/os-release", "ID=agentbox-test\n", 0o644, 0, 0),
		dirE("usr/", 0o755), dirE("usr/bin/", 0o755),
		fileE("usr/bin/su", "#!/bin/sh\n", 0o4755, 0, 0),
		linkE("usr/bin/su2", "usr/bin/su"),
		symlinkE("bin", "usr/bin"),
		dirE("home/", 0o755),
		tarEntry{hdr: tar.Header{Name: "home/user/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 1000, Gid: 1000,
			PAXRecords: map[string]string{"SCHILY.xattr.user.note": "kept", "SCHILY.xattr.trusted.overlay.redirect": "/etc"}}},
		fileE("home/user/.profile", "export A=1\n", 0o600, 1000, 1000),
		dirE("var/", 0o755), dirE("var/cache/", 0o755),
		fileE("var/cache/old", "old", 0o644, 0, 0),
		fileE("gone", "soon deleted", 0o644, 0, 0),
	)
	top := layerTar(t,
		fileE(".wh.gone", "", 0, 0, 0),
		dirE("var/cache/", 0o755),
		fileE("var/cache/.wh..wh..opq", "", 0, 0, 0),
		fileE("var/cache/new", "new", 0o644, 0, 0),
	)
	return imageOf(t, "", v1.Config{Env: []string{"PATH=/usr/bin", "LANG=C.UTF-8"}, WorkingDir: "/home/user", User: "1000:1000",
		Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo hi"}}, layerOf(t, base), layerOf(t, top))
}

func TestPullFromRegistry(t *testing.T) {
	s := testStore(t)
	r := newRegistry(t, "", "", nil)
	src := twoLayers(t)
	ref := r.push(t, "team/tools:1.0", src)
	var last Progress
	o := r.opts()
	o.Progress = func(p Progress) { last = p }
	img, err := s.Pull(context.Background(), ref, o)
	if err != nil {
		t.Fatal(err)
	}
	cfgName, _ := src.ConfigName()
	if img.ID != cfgName.String() || img.Kind != KindImage || !slices.Equal(img.Names, []string{ref}) {
		t.Fatalf("pulled %+v; want id %s, kind image, names [%s]", img, cfgName, ref)
	}
	if img.Config.WorkingDir != "/home/user" || img.Config.User != "1000:1000" || !slices.Equal(img.Config.Env, []string{"PATH=/usr/bin", "LANG=C.UTF-8"}) ||
		!slices.Equal(img.Config.Entrypoint, []string{"/bin/sh", "-c"}) || !slices.Equal(img.Config.Cmd, []string{"echo hi"}) {
		t.Errorf("config %+v is not the image's", img.Config)
	}
	if len(img.Layers) != 2 || last.Layers != 2 || last.LayersDone != 2 || last.Bytes == 0 || last.BytesDone != last.Bytes {
		t.Fatalf("layers %v, last progress %+v; want 2 layers fetched, all bytes read", img.Layers, last)
	}
	checkTwoLayers(t, img)

	// Every spelling finds it; a second pull fetches nothing.
	for _, q := range []string{ref, img.ID, img.ID[7:19], "sha256:" + img.ID[7:15]} {
		got, err := s.Get(context.Background(), q)
		if err != nil || got.ID != img.ID {
			t.Errorf("Get(%q) = %v, %v; want %s", q, got, err, img.ID)
		}
	}
	last = Progress{}
	if _, err := s.Pull(context.Background(), ref, o); err != nil {
		t.Fatal(err)
	}
	if last.Layers != 0 {
		t.Errorf("second pull fetched %d layers; want 0 (already in the store)", last.Layers)
	}
	list, err := s.List(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v; want the one image", list, err)
	}
}

// checkTwoLayers checks the unpacked layers of twoLayers.
func checkTwoLayers(t *testing.T, img *Image) {
	t.Helper()
	base, top := img.Layers[0], img.Layers[1]
	if b, err := os.ReadFile(filepath.Join(base, "etc/os-release")); err != nil || string(b) != "ID=agentbox-test\n" {
		t.Errorf("etc/os-release = %q, %v", b, err)
	}
	var su, su2, home unix.Stat_t
	mustLstat(t, filepath.Join(base, "usr/bin/su"), &su)
	mustLstat(t, filepath.Join(base, "usr/bin/su2"), &su2)
	if su.Mode&0o7777 != 0o4755 || su.Uid != 0 || su.Ino != su2.Ino {
		t.Errorf("usr/bin/su mode %o uid %d, su2 inode %d vs %d; want set-uid 4755 root, a hard link", su.Mode&0o7777, su.Uid, su2.Ino, su.Ino)
	}
	mustLstat(t, filepath.Join(base, "home/user"), &home)
	if home.Uid != 1000 || home.Gid != 1000 || home.Mode&0o7777 != 0o750 {
		t.Errorf("home/user is %d:%d mode %o; want 1000:1000 750", home.Uid, home.Gid, home.Mode&0o7777)
	}
	if v, err := getxattr(filepath.Join(base, "home/user"), "user.note"); err != nil || v != "kept" {
		t.Errorf("xattr user.note = %q, %v; want kept", v, err)
	}
	if _, err := getxattr(filepath.Join(base, "home/user"), "trusted.overlay.redirect"); err == nil {
		t.Error("a layer's trusted.overlay.redirect xattr was written; it would steer overlayfs")
	}
	if target, err := os.Readlink(filepath.Join(base, "bin")); err != nil || target != "usr/bin" {
		t.Errorf("bin -> %q, %v; want usr/bin", target, err)
	}
	var wh unix.Stat_t
	mustLstat(t, filepath.Join(top, "gone"), &wh)
	if wh.Mode&unix.S_IFMT != unix.S_IFCHR || wh.Rdev != 0 {
		t.Errorf("whiteout of gone has mode %o rdev %d; want a 0/0 character device", wh.Mode, wh.Rdev)
	}
	if _, err := os.Lstat(filepath.Join(top, ".wh.gone")); err == nil {
		t.Error(".wh.gone was written as a file")
	}
	if v, err := getxattr(filepath.Join(top, "var/cache"), opaqueXattr); err != nil || v != "y" {
		t.Errorf("var/cache opaque xattr = %q, %v; want y", v, err)
	}
	if b, err := os.ReadFile(filepath.Join(top, "var/cache/new")); err != nil || string(b) != "new" {
		t.Errorf("var/cache/new = %q, %v", b, err)
	}
}

func mustLstat(t *testing.T, p string, st *unix.Stat_t) {
	t.Helper()
	if err := unix.Lstat(p, st); err != nil {
		t.Fatal(err)
	}
}

func getxattr(p, name string) (string, error) {
	b := make([]byte, 256)
	n, err := unix.Lgetxattr(p, name, b)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

func TestPullBasicAuth(t *testing.T) {
	s := testStore(t)
	r := newRegistry(t, "agent", "s3cret-pw", nil)
	ref := r.push(t, "private/app:v1", twoLayers(t))

	for _, tc := range []struct {
		name string
		kc   authn.Keychain
	}{
		{"wrong password", staticKeychain{&authn.Basic{Username: "agent", Password: "wrong-pw"}}},
		{"no credentials", staticKeychain{authn.Anonymous}},
	} {
		_, err := s.Pull(context.Background(), ref, PullOptions{Insecure: true, Keychain: tc.kc})
		wantErr(t, err, ErrUnauthorized, tc.name)
		if strings.Contains(err.Error(), "wrong-pw") {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
		assertStoreEmpty(t, s)
	}
	img := mustPull(t, s, r, ref)
	if len(img.Layers) != 2 {
		t.Fatalf("pulled with credentials: %+v", img)
	}
}

func TestPullBadInput(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	good := layerTar(t, fileE("a", "good content", 0o644, 0, 0))
	other := layerTar(t, fileE("a", "other content", 0o644, 0, 0))
	goodLayer, otherLayer := layerOf(t, good), layerOf(t, other)
	goodDigest, _ := goodLayer.Digest()
	otherBlob := readAll(t, otherLayer)
	// The registry serves the other layer's bytes for the good layer's
	// digest: a valid gzip tar stream, with the wrong digest.
	r := newRegistry(t, "", "", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/blobs/"+goodDigest.String()) && strings.Contains(req.URL.Path, "/tampered/") {
				w.Write(otherBlob)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	tampered := r.push(t, "tampered/img:1", imageOf(t, "", v1.Config{}, goodLayer))

	// A configuration whose diff id is not the layer's.
	bad := imageOf(t, "", v1.Config{}, goodLayer)
	cfg, _ := bad.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.RootFS.DiffIDs[0], _ = otherLayer.DiffID()
	bad, _ = mutate.ConfigFile(bad, cfg)
	wrongDiff := r.push(t, "wrongdiff/img:1", bad)

	arm := r.push(t, "arm/img:1", imageOf(t, "linux/arm64", v1.Config{}, goodLayer))
	armOnly := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add:        imageOf(t, "linux/arm64", v1.Config{}, goodLayer),
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}},
	})
	armIndexRef := r.host + "/armindex/img:1"
	armIndexTag, _ := name.ParseReference(armIndexRef, name.Insecure)
	if err := remote.WriteIndex(armIndexTag, armOnly); err != nil {
		t.Fatal(err)
	}
	hostile := r.push(t, "hostile/img:1", imageOf(t, "", v1.Config{}, goodLayer,
		layerOf(t, layerTar(t, fileE("../../escaped", "x", 0o644, 0, 0)))))

	for _, tc := range []struct {
		name, ref string
		o         PullOptions
		want      error
	}{
		{"unknown image", r.host + "/no/such:tag", r.opts(), ErrNotFound},
		{"digest mismatch", tampered, r.opts(), ErrCorrupt},
		{"diff id mismatch", wrongDiff, r.opts(), ErrCorrupt},
		{"other platform", arm, PullOptions{Insecure: true, Platform: "linux/amd64"}, ErrPlatform},
		{"index without the platform", armIndexRef, PullOptions{Insecure: true, Platform: "linux/amd64"}, ErrPlatform},
		{"hostile layer", hostile, r.opts(), ErrCorrupt},
		{"missing OCI layout", "oci:" + filepath.Join(t.TempDir(), "nothing"), PullOptions{}, ErrNotFound},
		{"missing tarball", filepath.Join(t.TempDir(), "nothing.tar"), PullOptions{}, ErrNotFound},
	} {
		_, err := s.Pull(ctx, tc.ref, tc.o)
		wantErr(t, err, tc.want, tc.name)
		t.Logf("%s: %v", tc.name, err)
		assertStoreEmpty(t, s)
	}
	if _, err := s.Pull(ctx, arm, PullOptions{Insecure: true, Platform: "linux/arm64"}); err != nil {
		t.Errorf("pull %s for linux/arm64: %v", arm, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.Dir()), "escaped")); err == nil {
		t.Error("the hostile layer wrote outside the store")
	}
}

// TestPullLocalSources pulls the same image from an OCI layout, a docker
// save tarball and an unpacked folder.
func TestPullLocalSources(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	src := twoLayers(t)
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(src, layout.WithAnnotations(map[string]string{refNameAnnotation: "v2"})); err != nil {
		t.Fatal(err)
	}
	img, err := s.Pull(ctx, "oci:"+filepath.Join(dir, "layout")+":v2", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkTwoLayers(t, img)
	if _, err := s.Pull(ctx, "oci:"+filepath.Join(dir, "layout")+":v3", PullOptions{}); !strings.Contains(errString(err), `no image tagged "v3"`) {
		t.Errorf("pull of a missing tag: %v", err)
	}

	tag, _ := name.NewTag("example.com/tools:saved")
	tarPath := filepath.Join(dir, "saved.tar")
	if err := tarball.WriteToFile(tarPath, tag, src); err != nil {
		t.Fatal(err)
	}
	fromTar, err := s.Pull(ctx, tarPath, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fromTar.ID != img.ID || !slices.Contains(fromTar.Names, "example.com/tools:saved") {
		t.Errorf("from the tarball: id %s names %v; want %s and the tarball's tag", fromTar.ID, fromTar.Names, img.ID)
	}
	if got, err := s.Get(ctx, "example.com/tools:saved"); err != nil || got.ID != img.ID {
		t.Errorf("Get by the tarball's tag: %v, %v", got, err)
	}

	// `docker save | gzip > saved.tar.gz`
	gzTag, _ := name.NewTag("example.com/tools:gz")
	plain := filepath.Join(dir, "gz.tar")
	must(t, tarball.WriteToFile(plain, gzTag, src))
	gzPath := filepath.Join(dir, "saved.tar.gz")
	must(t, gzipFile(plain, gzPath))
	fromGz, err := s.Pull(ctx, gzPath, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fromGz.ID != img.ID || !slices.Contains(fromGz.Names, "example.com/tools:gz") {
		t.Errorf("from the gzipped tarball: id %s names %v; want %s and its tag", fromGz.ID, fromGz.Names, img.ID)
	}
}

// gzipFile writes the gzip compression of the file src to dst.
func gzipFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestPullFolder(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "rootfs")
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("ID=folder\n"), 0o644))
	must(t, os.Symlink("/etc/os-release", filepath.Join(root, "os-release")))
	must(t, os.Link(filepath.Join(root, "etc/os-release"), filepath.Join(root, "etc/hard")))
	must(t, os.Chown(filepath.Join(root, "etc"), 7, 8))
	must(t, unix.Mknod(filepath.Join(root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(t, unix.Mknod(filepath.Join(root, "whiteout"), unix.S_IFCHR, 0))

	img, err := s.Pull(ctx, root, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 1 || !slices.Equal(img.Names, []string{root}) || img.Size != int64(len("ID=folder\n")) {
		t.Fatalf("imported %+v; want one layer named %s of %d bytes", img, root, len("ID=folder\n"))
	}
	l := img.Layers[0]
	var a, b, etc, wh unix.Stat_t
	mustLstat(t, filepath.Join(l, "etc/os-release"), &a)
	mustLstat(t, filepath.Join(l, "etc/hard"), &b)
	mustLstat(t, filepath.Join(l, "etc"), &etc)
	mustLstat(t, filepath.Join(l, "whiteout"), &wh)
	if a.Ino != b.Ino || etc.Uid != 7 || etc.Gid != 8 || wh.Mode&unix.S_IFMT != unix.S_IFCHR || wh.Rdev != 0 {
		t.Errorf("hard link kept %v, etc owner %d:%d, whiteout mode %o: want a link, 7:8, a 0/0 device", a.Ino == b.Ino, etc.Uid, etc.Gid, wh.Mode)
	}
	if target, _ := os.Readlink(filepath.Join(l, "os-release")); target != "/etc/os-release" {
		t.Errorf("symlink -> %q; want /etc/os-release (resolved inside the sandbox)", target)
	}
	if _, err := os.Lstat(filepath.Join(l, "null")); err == nil {
		t.Error("a device node was copied into the layer; want it skipped")
	}
	again, err := s.Pull(ctx, root, PullOptions{})
	if err != nil || again.ID != img.ID {
		t.Errorf("importing the same folder again: %v, %v; want the same id %s", again, err, img.ID)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// helperPullEnv makes the test binary a process that pulls REF into the
// store DIR ("DIR REF") and exits: TestConcurrentPulls's other processes.
const helperPullEnv = "AGENTBOX_IMAGE_TEST_PULL"

func TestMain(m *testing.M) {
	if arg := os.Getenv(helperPullEnv); arg != "" {
		dir, ref, _ := strings.Cut(arg, " ")
		s, err := Open(dir)
		if err == nil {
			_, err = s.Pull(context.Background(), ref, PullOptions{Insecure: true})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestConcurrentPulls pulls one image at once from two processes and
// through two Stores of this one sharing the folder.
func TestConcurrentPulls(t *testing.T) {
	a := testStore(t)
	b, err := Open(a.Dir())
	must(t, err)
	r := newRegistry(t, "", "", nil)
	ref := r.push(t, "shared/img:1", twoLayers(t))
	var wg sync.WaitGroup
	imgs := make([]*Image, 4)
	errs := make([]error, 4)
	for i := range imgs {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() { imgs[i], errs[i] = s.Pull(context.Background(), ref, r.opts()) })
	}
	procs := make([][]byte, 2)
	procErrs := make([]error, 2)
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperPullEnv+"="+a.Dir()+" "+ref)
			procs[i], procErrs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	for i := range procs {
		if procErrs[i] != nil {
			t.Fatalf("pull in process %d: %v\n%s", i, procErrs[i], procs[i])
		}
	}
	for i := range imgs {
		if errs[i] != nil {
			t.Fatalf("pull %d: %v", i, errs[i])
		}
		if imgs[i].ID != imgs[0].ID || !slices.Equal(imgs[i].Layers, imgs[0].Layers) {
			t.Errorf("pull %d gave %+v, pull 0 %+v", i, imgs[i], imgs[0])
		}
	}
	checkTwoLayers(t, imgs[0])
	ents, _ := os.ReadDir(filepath.Join(a.Dir(), "layers"))
	if len(ents) != 4 { // two folders, two size files
		t.Errorf("layers/ holds %d entries; want 2 layers and their 2 size files", len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Join(a.Dir(), "tmp")); len(ents) != 0 {
		t.Errorf("tmp/ holds %d entries after the pulls", len(ents))
	}
}

func readAll(t testing.TB, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Compressed()
	must(t, err)
	defer rc.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(rc)
	must(t, err)
	return buf.Bytes()
}

// TestPullCancelled cancels a pull once bytes flow: it stops, and leaves
// nothing in the store.
func TestPullCancelled(t *testing.T) {
	s := testStore(t)
	r := newRegistry(t, "", "", nil)
	ref := r.push(t, "slow/img:1", twoLayers(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := r.opts()
	o.Progress = func(p Progress) {
		if p.BytesDone > 0 {
			cancel()
		}
	}
	_, err := s.Pull(ctx, ref, o)
	wantErr(t, err, context.Canceled, "cancelled pull")
	assertStoreEmpty(t, s)
}

// TestPullMirror pulls a Docker Hub image through a mirror (the loopback
// registry), which serves all of it: Docker Hub is never asked.
func TestPullMirror(t *testing.T) {
	s := testStore(t)
	r := newRegistry(t, "", "", nil)
	r.push(t, "library/tools:1.0", twoLayers(t))
	o := r.opts()
	o.Mirrors = []string{"127.0.0.1:1", r.host} // the first refuses connections
	img, err := s.Pull(context.Background(), "tools:1.0", o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(img.Names, []string{"index.docker.io/library/tools:1.0"}) {
		t.Errorf("names %v; want the Docker Hub reference", img.Names)
	}
	checkTwoLayers(t, img)
	if got, err := s.Get(context.Background(), "tools:1.0"); err != nil || got.ID != img.ID {
		t.Errorf("Get(tools:1.0) = %v, %v", got, err)
	}
}
