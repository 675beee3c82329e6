package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local/image"
)

const appDockerfile = `# syntax=docker/dockerfile:1
ARG BASE=base:1
FROM $BASE
ARG VERSION=1.0
ENV APP_HOME=/srv/app PATH=$PATH:/srv/bin
WORKDIR $APP_HOME
COPY --chown=app:app app/ ./
COPY tool.sh /bin/
COPY *.txt /data/
ADD files.tar.gz /opt/
ADD plain.txt /plain-added
RUN echo $VERSION > /version
USER app
ENTRYPOINT ["/srv/app/run"]
LABEL org.example.name=app
EXPOSE 8080
`

// appContext writes a build context for appDockerfile.
func appContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile":       appDockerfile,
		".dockerignore":    "**/*.log\nsecret.txt\n",
		"app/main.py":      "print('hi')\n",
		"app/sub/data.txt": "data",
		"app/debug.log":    "ignored",
		"app/link":         "->main.py",
		"tool.sh":          "#!/bin/sh\n",
		"a.txt":            "a",
		"b.txt":            "b",
		"secret.txt":       "never copied",
		"plain.txt":        "not an archive",
	})
	if err := os.Chmod(filepath.Join(dir, "tool.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTarGz(t, filepath.Join(dir, "files.tar.gz"))
	return dir
}

// writeTarGz writes a gzipped tar with a folder, an owned file, a
// symbolic link, a hard link and a "../" entry.
func writeTarGz(t *testing.T, name string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, h := range []tar.Header{
		{Name: "pkg/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime},
		{Name: "pkg/bin/x", Typeflag: tar.TypeReg, Mode: 0o750, Uid: 5, Gid: 6, Size: 3, ModTime: mtime},
		{Name: "pkg/l", Typeflag: tar.TypeSymlink, Linkname: "bin/x", ModTime: mtime},
		{Name: "pkg/h", Typeflag: tar.TypeLink, Linkname: "pkg/bin/x", ModTime: mtime},
		{Name: "../../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3, ModTime: mtime},
	} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("xyz")[:h.Size])
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "building layers needs root (chown of copied files)")
}

// testBuild builds ctxDir with a fake store and runner sharing cacheDir.
type testBuild struct {
	t      *testing.T
	store  *fakeStore
	runner *fakeRunner
	b      *Builder
}

func newTestBuild(t *testing.T) *testBuild {
	s := newFakeStore(t)
	baseImage(t, s)
	r := &fakeRunner{store: s}
	return &testBuild{t: t, store: s, runner: r, b: &Builder{Store: s, Runner: r, CacheDir: filepath.Join(s.dir, "build-cache")}}
}

func (tb *testBuild) build(o Options) (*image.Image, string, error) {
	var logs bytes.Buffer
	o.Logs = &logs
	img, err := tb.b.Build(context.Background(), o)
	return img, logs.String(), err
}

func (tb *testBuild) mustBuild(o Options) (*image.Image, string) {
	tb.t.Helper()
	img, logs, err := tb.build(o)
	if err != nil {
		tb.t.Fatalf("Build: %v\nlogs:\n%s", err, logs)
	}
	return img, logs
}

func owner(t *testing.T, p string) (int, int, fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), fi.Mode()
}

func TestBuildWholeDockerfile(t *testing.T) {
	requireRoot(t)
	tb := newTestBuild(t)
	ctxDir := appContext(t)
	img, logs := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"app:1"}})

	wantCfg := image.Config{
		Env:        []string{"PATH=/usr/bin:/srv/bin", "APP_HOME=/srv/app"},
		WorkingDir: "/srv/app",
		User:       "app",
		Entrypoint: []string{"/srv/app/run"},
		// ENTRYPOINT resets the Cmd inherited from the base image.
	}
	if !reflect.DeepEqual(img.Config, wantCfg) {
		t.Errorf("Config = %+v, want %+v", img.Config, wantCfg)
	}
	if got := tb.store.images["app:1"]; got == nil || got.ID != img.ID {
		t.Errorf("image not saved as app:1: %+v", got)
	}
	// base + WORKDIR + 3 COPY + 2 ADD + RUN.
	if len(img.Layers) != 8 {
		t.Fatalf("%d layers, want 8: %v", len(img.Layers), img.Layers)
	}
	workdir, app, tool, txt, tarL, plain, run := img.Layers[1], img.Layers[2], img.Layers[3], img.Layers[4], img.Layers[5], img.Layers[6], img.Layers[7]

	if uid, gid, mode := owner(t, filepath.Join(workdir, "srv/app")); uid != 0 || gid != 0 || !mode.IsDir() {
		t.Errorf("WORKDIR folder %d:%d %v, want a folder owned 0:0", uid, gid, mode)
	}
	// COPY --chown=app:app app/ ./ : names resolved in the image's
	// /etc/passwd and /etc/group; .dockerignore'd files left out; the
	// folders the image has keep their owner.
	if uid, gid, _ := owner(t, filepath.Join(app, "srv/app/main.py")); uid != 1000 || gid != 1001 {
		t.Errorf("main.py owned %d:%d, want 1000:1001", uid, gid)
	}
	if uid, _, _ := owner(t, filepath.Join(app, "srv/app")); uid != 0 {
		t.Errorf("/srv/app in the COPY layer owned by %d, want 0 as in the layer below", uid)
	}
	if b, err := os.ReadFile(filepath.Join(app, "srv/app/sub/data.txt")); string(b) != "data" {
		t.Errorf("sub/data.txt = %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(app, "srv/app/link")); l != "main.py" {
		t.Errorf("link = %q, %v; want a symbolic link to main.py", l, err)
	}
	if _, err := os.Lstat(filepath.Join(app, "srv/app/debug.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("debug.log copied despite .dockerignore: %v", err)
	}
	// COPY tool.sh /bin/ goes through the image's /bin → usr/bin link.
	if _, _, mode := owner(t, filepath.Join(tool, "usr/bin/tool.sh")); mode != 0o755 {
		t.Errorf("tool.sh mode %v, want 0755", mode)
	}
	if _, err := os.Lstat(filepath.Join(tool, "bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("COPY made a /bin folder hiding the image's /bin link: %v", err)
	}
	// COPY *.txt /data/: globs over the kept files only.
	names := dirNames(t, filepath.Join(txt, "data"))
	if !reflect.DeepEqual(names, []string{"a.txt", "b.txt", "plain.txt"}) {
		t.Errorf("/data has %v, want a.txt b.txt plain.txt (secret.txt is ignored)", names)
	}
	// ADD of a local tar.gz extracts it, owners and modes kept, "../"
	// kept inside the destination, hard links linked.
	if uid, gid, mode := owner(t, filepath.Join(tarL, "opt/pkg/bin/x")); uid != 5 || gid != 6 || mode != 0o750 {
		t.Errorf("extracted x %d:%d %v, want 5:6 0750", uid, gid, mode)
	}
	if l, _ := os.Readlink(filepath.Join(tarL, "opt/pkg/l")); l != "bin/x" {
		t.Errorf("extracted symlink -> %q", l)
	}
	x, _ := os.Stat(filepath.Join(tarL, "opt/pkg/bin/x"))
	h, err := os.Stat(filepath.Join(tarL, "opt/pkg/h"))
	if err != nil || !os.SameFile(x, h) {
		t.Errorf("pkg/h is not a hard link of pkg/bin/x: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(tarL, "opt/escape")); string(b) != "xyz" {
		t.Errorf("../../escape not extracted inside /opt: %q, %v", b, err)
	}
	if entries := dirNames(t, tarL); !reflect.DeepEqual(entries, []string{"opt"}) {
		t.Errorf("the ADD layer has %v at its top, want only opt", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(plain, "plain-added")); string(b) != "not an archive" {
		t.Errorf("ADD of a plain file = %q", b)
	}
	// RUN ran over every layer before it, with the image's config and the
	// build arguments.
	if tb.runner.count() != 1 {
		t.Fatalf("runner called %d times, want 1", tb.runner.count())
	}
	c := tb.runner.calls[0]
	if !reflect.DeepEqual(c.step.Args, []string{"/bin/sh", "-c", "echo $VERSION > /version"}) || !reflect.DeepEqual(c.step.Env, []string{"VERSION=1.0"}) || c.step.Line != 12 {
		t.Errorf("RUN step = %+v", c.step)
	}
	if !reflect.DeepEqual(c.layers, img.Layers[:7]) || c.config.WorkingDir != "/srv/app" || c.config.User != "" {
		t.Errorf("RUN ran over %v with %+v", c.layers, c.config)
	}
	if _, err := os.Stat(filepath.Join(run, "ran", "12")); err != nil {
		t.Errorf("RUN layer: %v", err)
	}
	for _, want := range []string{"Step 1/14 : FROM $BASE\n", "Step 10/14 : RUN echo $VERSION > /version\nfake run: /bin/sh -c echo $VERSION > /version\n", "Step 14/14 : EXPOSE 8080\n", "Successfully built " + img.ID, "Successfully tagged app:1\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "Using cache") {
		t.Errorf("first build used the cache:\n%s", logs)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestBuildSecondBuildFullyCached(t *testing.T) {
	requireRoot(t)
	tb := newTestBuild(t)
	ctxDir := appContext(t)
	first, _ := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"app:1"}})
	layers, runs := tb.store.layers(), tb.runner.count()

	second, logs := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"app:1"}})
	if second.ID != first.ID || !reflect.DeepEqual(second.Layers, first.Layers) {
		t.Errorf("second build differs: %v vs %v", second.Layers, first.Layers)
	}
	if tb.store.layers() != layers || tb.runner.count() != runs {
		t.Errorf("second build made %d layers and ran %d steps, want none", tb.store.layers()-layers, tb.runner.count()-runs)
	}
	if n := strings.Count(logs, " ---> Using cache\n"); n != 7 {
		t.Errorf("%d steps used the cache, want all 7 layer steps:\n%s", n, logs)
	}

	// A changed file: its COPY and every step after it run again.
	writeFiles(t, ctxDir, map[string]string{"b.txt": "changed"})
	third, logs := tb.mustBuild(Options{ContextDir: ctxDir})
	if n := strings.Count(logs, " ---> Using cache\n"); n != 3 {
		t.Errorf("%d steps used the cache after b.txt changed, want 3 (WORKDIR and two COPY):\n%s", n, logs)
	}
	if third.ID != "" || !reflect.DeepEqual(third.Layers[:4], first.Layers[:4]) || third.Layers[4] == first.Layers[4] {
		t.Errorf("layers after a change: %v, first %v", third.Layers, first.Layers)
	}
	if tb.runner.count() != runs+1 {
		t.Errorf("RUN after the changed COPY ran %d times, want 1", tb.runner.count()-runs)
	}
	if !strings.Contains(logs, "not saved") {
		t.Errorf("a build without a name does not say it kept no image:\n%s", logs)
	}

	// A build argument changes the RUN only.
	_, logs = tb.mustBuild(Options{ContextDir: ctxDir, BuildArgs: map[string]string{"VERSION": "2.0", "UNUSED": "x"}})
	if n := strings.Count(logs, " ---> Using cache\n"); n != 6 {
		t.Errorf("%d steps used the cache with a new VERSION, want 6:\n%s", n, logs)
	}
	if c := tb.runner.calls[len(tb.runner.calls)-1]; !reflect.DeepEqual(c.step.Env, []string{"VERSION=2.0"}) {
		t.Errorf("RUN env = %v, want VERSION=2.0", c.step.Env)
	}
	if !strings.Contains(logs, "were not used: UNUSED") {
		t.Errorf("no warning about the unused build argument:\n%s", logs)
	}

	// A proxy reaches RUN without an ARG and leaves the cache as it was.
	_, logs = tb.mustBuild(Options{ContextDir: ctxDir, BuildArgs: map[string]string{"VERSION": "2.0", "HTTPS_PROXY": "http://proxy:3128"}})
	if n := strings.Count(logs, " ---> Using cache\n"); n != 7 || strings.Contains(logs, "Warning") {
		t.Errorf("%d steps used the cache with a proxy added, want 7, and no warning:\n%s", n, logs)
	}
	// NoCache runs everything again.
	_, logs = tb.mustBuild(Options{ContextDir: ctxDir, NoCache: true, BuildArgs: map[string]string{"HTTPS_PROXY": "http://proxy:3128"}})
	if c := tb.runner.calls[len(tb.runner.calls)-1]; !reflect.DeepEqual(c.step.Env, []string{"VERSION=1.0", "HTTPS_PROXY=http://proxy:3128"}) {
		t.Errorf("RUN env = %v, want VERSION and the proxy", c.step.Env)
	}
	if strings.Contains(logs, "Using cache") {
		t.Errorf("NoCache used the cache:\n%s", logs)
	}
}

func TestCacheKeys(t *testing.T) {
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{"f": "one", "g": "g"})
	df := mustParse(t, "FROM base\nENV A=1\nCOPY f /f\nCOPY g /g\nRUN true\n")
	keys := func(parent string, buildArgs map[string]string) []string {
		t.Helper()
		bc, err := openContext(ctxDir)
		if err != nil {
			t.Fatal(err)
		}
		p := newPlanner(df, bc, Options{BuildArgs: buildArgs}, image.Config{}, nil)
		steps, err := p.plan(0, len(df.Instructions), parent)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range steps {
			out = append(out, s.key)
		}
		return out
	}
	a, b := keys("sha256:p", nil), keys("sha256:p", nil)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same input, different keys: %v %v", a, b)
	}
	if other := keys("sha256:q", nil); other[0] == a[0] || other[3] == a[3] {
		t.Errorf("another base image gives the same keys")
	}
	if err := os.Chmod(filepath.Join(ctxDir, "f"), 0o600); err != nil {
		t.Fatal(err)
	}
	mode := keys("sha256:p", nil)
	if mode[0] != a[0] || mode[1] == a[1] || mode[2] == a[2] {
		t.Errorf("a mode change of f: keys %v, before %v; want ENV same, COPY f and after changed", mode, a)
	}
	writeFiles(t, ctxDir, map[string]string{"g": "G"})
	content := keys("sha256:p", nil)
	if content[1] != mode[1] || content[2] == mode[2] || content[3] == mode[3] {
		t.Errorf("a content change of g: keys %v, before %v; want COPY f same, COPY g and after changed", content, mode)
	}
}

func TestBuildBadInputBeforeAnythingRuns(t *testing.T) {
	for _, tc := range []struct {
		name, dockerfile string
		want             string
		is               error
	}{
		{"missing file", "FROM base:1\nRUN true\nCOPY nothere.txt /x\n", "Dockerfile line 3: COPY: source \"nothere.txt\": no such file in the build context", fs.ErrNotExist},
		{"ignored file", "FROM base:1\nRUN true\nCOPY secret.txt /x\n", "Dockerfile line 3: COPY: source \"secret.txt\"", fs.ErrNotExist},
		{"glob matches nothing", "FROM base:1\nRUN true\nCOPY *.md /x/\n", "no file of the build context", nil},
		{"outside the context", "FROM base:1\nRUN true\nCOPY ../x /x\n", "outside the build context", nil},
		{"url", "FROM base:1\nRUN true\nADD https://example.com/f /f\n", "ADD of URLs", ErrUnsupported},
		{"several sources to a file", "FROM base:1\nRUN true\nCOPY a.txt b.txt /x\n", "must be a folder ending in /", nil},
		{"unknown base", "FROM nope:1\nRUN true\n", "Dockerfile line 1: FROM: image nope:1", image.ErrNotFound},
		{"unsupported", "FROM base:1\nRUN true\nSTOPSIGNAL 9\n", "line 3: STOPSIGNAL", ErrUnsupported},
		{"required variable", "FROM base:1\nRUN true\nWORKDIR ${DIR:?set DIR}\n", "line 3: WORKDIR: variable DIR: set DIR", nil},
		{"bad chmod", "FROM base:1\nRUN true\nCOPY --chmod=9 a.txt /x\n", "invalid --chmod=9", nil},
		{"bad port", "FROM base:1\nRUN true\nEXPOSE http\n", "invalid port", nil},
		{"other platform", "FROM --platform=other/arch base:1\nRUN true\n", "line 1: FROM: --platform=other/arch", ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestBuild(t)
			ctxDir := t.TempDir()
			writeFiles(t, ctxDir, map[string]string{"Dockerfile": tc.dockerfile, "a.txt": "a", "b.txt": "b", "secret.txt": "s", ".dockerignore": "secret.txt\n"})
			layers := tb.store.layers()
			_, _, err := tb.build(Options{ContextDir: ctxDir, Names: []string{"x"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build error = %v, want %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			if tb.runner.count() != 0 || tb.store.layers() != layers || len(tb.store.images) != 1 {
				t.Errorf("a bad build ran %d steps, made %d layers, %d images", tb.runner.count(), tb.store.layers()-layers, len(tb.store.images)-1)
			}
		})
	}
}

func TestBuildVariablesArgsAndScratch(t *testing.T) {
	requireRoot(t)
	tb := newTestBuild(t)
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{
		"Dockerfile": `ARG DIR=/opt/x
FROM --platform=${TARGETPLATFORM:-` + runtime.GOOS + "/" + runtime.GOARCH + `} scratch
ARG DIR
ARG UNSET
ENV E1=[$UNSET] E2=${UNSET:-dflt} E3="$DIR" HOME=/h
ENV SELF=$E1
COPY ["f", "$HOME/"]
CMD ["run", "$E1"]
ENTRYPOINT /bin/entry --flag
`,
		"f": "f",
	})
	img, _ := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"vars"}})
	want := image.Config{
		Env: []string{"E1=[]", "E2=dflt", "E3=/opt/x", "HOME=/h", "SELF=[]"},
		// CMD set in this Dockerfile stays under a later ENTRYPOINT; the
		// exec form is not substituted.
		Cmd:        []string{"run", "$E1"},
		Entrypoint: []string{"/bin/sh", "-c", "/bin/entry --flag"},
	}
	if !reflect.DeepEqual(img.Config, want) {
		t.Errorf("Config = %+v\nwant %+v", img.Config, want)
	}
	if len(img.Layers) != 1 {
		t.Fatalf("layers %v, want the COPY's only", img.Layers)
	}
	if b, err := os.ReadFile(filepath.Join(img.Layers[0], "h", "f")); string(b) != "f" {
		t.Errorf("COPY to $HOME/: %q, %v", b, err)
	}
	if uid, gid, mode := owner(t, filepath.Join(img.Layers[0], "h")); uid != 0 || gid != 0 || mode != fs.ModeDir|0o755 {
		t.Errorf("new folder /h: %d:%d %v, want 0:0 0755", uid, gid, mode)
	}
}

func TestBuildRunFailureNamesTheLine(t *testing.T) {
	tb := newTestBuild(t)
	tb.runner.fail = true
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{"Dockerfile": "FROM base:1\nENV A=1\nRUN false\n"})
	_, _, err := tb.build(Options{ContextDir: ctxDir, Names: []string{"x"}})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || le.Instruction != "RUN" || !strings.Contains(err.Error(), "exited with code 1") {
		t.Fatalf("error = %v, want line 3 RUN and the runner's error", err)
	}
	if len(tb.store.images) != 1 {
		t.Errorf("a failed build saved an image")
	}
	// Nothing was cached for the failed step: the next build runs it.
	tb.runner.fail = false
	_, logs := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"x"}})
	if strings.Contains(logs, "Using cache") || tb.runner.count() != 2 {
		t.Errorf("the failed RUN was cached (runs %d):\n%s", tb.runner.count(), logs)
	}
}

func TestBuildNoDockerfile(t *testing.T) {
	tb := newTestBuild(t)
	_, _, err := tb.build(Options{ContextDir: t.TempDir()})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no Dockerfile at") {
		t.Errorf("error = %v", err)
	}
}

func TestBuildMultiStage(t *testing.T) {
	requireRoot(t)
	tb := newTestBuild(t)
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{
		"app/main.py": "main",
		"Dockerfile": `FROM base:1 AS builder
WORKDIR /src
COPY app/ ./
RUN make
FROM builder AS tested
RUN make test
FROM scratch
COPY --from=builder /src/main.py /app/
COPY --from=0 /ran /from-builder/
COPY --from=base:1 /bin/sh /sh
COPY --from=tested /etc /etc-copy/
ENV FINAL=1
`,
	})
	img, logs := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"multi"}})
	if len(img.Layers) != 4 || !reflect.DeepEqual(img.Config, image.Config{Env: []string{"FINAL=1"}}) {
		t.Fatalf("final image %+v, want the 4 COPY layers over scratch and FINAL=1 only", img)
	}
	for p, want := range map[string]string{
		"app/main.py":      "main",
		"from-builder/4":   "/bin/sh -c make\n",
		"sh":               "#!fake shell",
		"etc-copy/passwd":  "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n",
		"etc-copy/os-name": "fake",
	} {
		found := false
		for _, l := range img.Layers {
			if b, err := os.ReadFile(filepath.Join(l, p)); err == nil {
				found = true
				if string(b) != want {
					t.Errorf("%s = %q, want %q", p, b, want)
				}
			}
		}
		if !found {
			t.Errorf("%s is in no layer of the final image", p)
		}
	}
	if tb.runner.count() != 2 {
		t.Fatalf("runner called %d times, want 2", tb.runner.count())
	}
	builder, tested := tb.runner.calls[0], tb.runner.calls[1]
	if !reflect.DeepEqual(tested.layers, append(builder.layers, tested.layers[len(tested.layers)-1])) || len(tested.layers) != 4 || tested.config.WorkingDir != "/src" {
		t.Errorf("the stage FROM builder ran over %v (%+v), builder's RUN over %v", tested.layers, tested.config, builder.layers)
	}
	if !strings.Contains(logs, "Step 7/12 : FROM scratch\n") {
		t.Errorf("steps are not numbered across stages:\n%s", logs)
	}
	layers, runs := tb.store.layers(), tb.runner.count()
	// Target stops at a stage: builder, all cached.
	target, logs := tb.mustBuild(Options{ContextDir: ctxDir, Target: "Builder"})
	if target.Config.WorkingDir != "/src" || len(target.Layers) != 4 || strings.Contains(logs, "FROM scratch") {
		t.Errorf("--target builder built %+v:\n%s", target, logs)
	}
	if _, _, err := tb.build(Options{ContextDir: ctxDir, Target: "nope"}); err == nil || !strings.Contains(err.Error(), `no stage named "nope"`) {
		t.Errorf("unknown target: %v", err)
	}
	again, logs := tb.mustBuild(Options{ContextDir: ctxDir, Names: []string{"multi"}})
	if tb.store.layers() != layers || tb.runner.count() != runs || again.ID != img.ID {
		t.Errorf("second multi-stage build made %d layers, ran %d steps:\n%s", tb.store.layers()-layers, tb.runner.count()-runs, logs)
	}
}

func TestBuildCopyFromErrors(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct{ name, dockerfile, want string }{
		{"missing file", "FROM base:1 AS a\nFROM scratch\nCOPY --from=a /nothere /x\n", "line 3: COPY: no /nothere in the stage or image copied from"},
		{"this stage", "FROM base:1 AS a\nCOPY --from=a /etc /x\n", "line 2: COPY: --from=a names this stage"},
		{"unknown image", "FROM base:1\nRUN true\nCOPY --from=nope:2 /etc /x\n", "line 3: COPY: image nope:2: "},
		{"pattern", "FROM base:1 AS a\nFROM scratch\nCOPY --from=a /etc/* /x/\n", "patterns in COPY --from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestBuild(t)
			ctxDir := t.TempDir()
			writeFiles(t, ctxDir, map[string]string{"Dockerfile": tc.dockerfile})
			_, _, err := tb.build(Options{ContextDir: ctxDir})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if tb.runner.count() != 0 {
				t.Errorf("a RUN ran")
			}
		})
	}
}
