//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
)

// buildContext writes a build context with dockerfile and a data file.
func buildContext(t *testing.T, dockerfile string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"Dockerfile": dockerfile, "data.txt": "from the context\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestImageBuild: a Dockerfile build runs its RUN steps in sandboxes of
// the base image, its result starts sandboxes by name, and a second build
// of the same context is cached whole (no RUN runs again).
func TestImageBuild(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := t.TempDir()
	if _, err := local.SaveImage(ctx, state, &image.Image{Names: []string{"test/base:1"}, Layers: []string{testRootfs(t)}}); err != nil {
		t.Fatal(err)
	}
	dir := buildContext(t, `FROM test/base:1
ARG GREETING=hello
ENV APP_DIR=/srv/app
WORKDIR /srv/app
COPY data.txt ./
RUN echo "$GREETING from a RUN step" > out.txt && cat data.txt >> out.txt && echo step-output-$((40+2))
CMD ["cat", "/srv/app/out.txt"]
`)
	b, err := local.NewImageBuilder(state, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	img, err := b.Build(ctx, build.Options{ContextDir: dir, Names: []string{"test/app:1"}, Logs: &logs})
	if err != nil {
		t.Fatalf("build: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "step-output-42") {
		t.Errorf("the RUN step's output is not in the logs:\n%s", logs.String())
	}
	sb := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: "test/app:1"}})
	if got := mustRun(t, sb, "cat out.txt; echo $APP_DIR; pwd"); got != "hello from a RUN step\nfrom the context\n/srv/app\n/srv/app\n" {
		t.Errorf("a sandbox of the built image sees %q", got)
	}

	logs.Reset()
	again, err := b.Build(ctx, build.Options{ContextDir: dir, Names: []string{"test/app:1"}, Logs: &logs})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != img.ID || strings.Contains(logs.String(), "step-output-42") || !strings.Contains(logs.String(), "Using cache") {
		t.Errorf("second build: id %s (first %s), logs:\n%s", again.ID, img.ID, logs.String())
	}
	if boxes, err := local.List(ctx, state); err != nil || len(boxes) != 1 || boxes[0].ID != sb.ID() {
		t.Errorf("sandboxes after the builds: %v, %v; want only %s (the steps' sandboxes are removed)", boxes, err, sb.ID())
	}
}

// A Dockerfile with an unsupported instruction fails before anything
// runs, naming the line; no sandbox and no image are left.
func TestImageBuildUnsupported(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := t.TempDir()
	if _, err := local.SaveImage(ctx, state, &image.Image{Names: []string{"test/base:1"}, Layers: []string{testRootfs(t)}}); err != nil {
		t.Fatal(err)
	}
	dir := buildContext(t, "FROM test/base:1\nRUN touch /x\nHEALTHCHECK CMD true\n")
	b, err := local.NewImageBuilder(state, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Build(ctx, build.Options{ContextDir: dir, Names: []string{"test/bad:1"}, Logs: &bytes.Buffer{}})
	var le *build.LineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.Contains(err.Error(), "HEALTHCHECK") {
		t.Fatalf("build = %v; want an error naming HEALTHCHECK on line 3", err)
	}
	if boxes, err := local.List(ctx, state); err != nil || len(boxes) != 0 {
		t.Errorf("sandboxes left: %v, %v", boxes, err)
	}
}

// TestImageBuildSkipsEntrypoint: a RUN step does not start the image's
// entrypoint (as with Docker), so nothing it runs writes into the step's
// layer: the step watches for the entrypoint's mark for 3s.
func TestImageBuildSkipsEntrypoint(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := t.TempDir()
	if _, err := local.SaveImage(ctx, state, &image.Image{Names: []string{"test/served:1"}, Layers: []string{testRootfs(t)},
		Config: image.Config{Entrypoint: []string{"sh", "-c", "touch /entrypoint-ran; exec sleep 1000"}},
	}); err != nil {
		t.Fatal(err)
	}
	dir := buildContext(t, "FROM test/served:1\nRUN i=0; while [ $i -lt 30 ]; do if [ -e /entrypoint-ran ]; then echo the entrypoint ran; exit 1; fi; sleep 0.1; i=$((i+1)); done\n")
	b, err := local.NewImageBuilder(state, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if _, err := b.Build(ctx, build.Options{ContextDir: dir, Names: []string{"test/served-app:1"}, Logs: &logs}); err != nil {
		t.Fatalf("build: %v\n%s", err, logs.String())
	}
}
