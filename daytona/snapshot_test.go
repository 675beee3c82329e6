package daytona

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestDaytonaSnapshot builds snapshots over agentbox serve (its local
// image builder: RUN steps in real sandboxes): a declarative image whose
// build logs stream to the writer as the build goes, made into a sandbox
// that has what the steps did; a pull of a base image; a failing build,
// a *SnapshotFailedError with the reason; delete.
func TestDaytonaSnapshot(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	s := newServe(t, nil)
	st, err := local.OpenImageStore(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	testrootfs.SaveImage(t, st, "team/base:1")
	c := s.client(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	img := BaseImage("team/base:1").
		RunCommands("echo built-by-run > /built", "echo from-the-run-step").
		Env(map[string]string{"GREETING": "hello snapshot"})
	var logs strings.Builder
	snap, err := c.BuildSnapshot(ctx, "tools:1", img, sandbox.Resources{CPUCores: 1, MemoryMiB: 1 << 10}, &logs)
	if err != nil {
		t.Fatalf("build: %v (logs %q)", err, logs.String())
	}
	if snap.State != SnapshotActive || snap.Name != "tools:1" || snap.CPU != 1 || snap.Mem != 1 {
		t.Errorf("snapshot %+v", snap)
	}
	if !strings.Contains(logs.String(), "FROM team/base:1") || !strings.Contains(logs.String(), "from-the-run-step\n") {
		t.Errorf("build logs %q: want the steps and the RUN's output", logs.String())
	}
	got, err := c.GetSnapshot(ctx, "tools:1")
	if err != nil || got.BuildInfo == nil || got.BuildInfo.DockerfileContent != img.Dockerfile() {
		t.Errorf("the snapshot's buildInfo: %+v, %v", got, err)
	}
	sb := newEngine(t, s, Config{}, Options{Snapshot: "tools:1"})
	res, err := sb.ExecuteCommand(ctx, `cat /built; echo "$GREETING"`, nil, nil)
	if err != nil || res.Stdout != "built-by-run\nhello snapshot\n" {
		t.Errorf("a sandbox of the snapshot: %+v, %v", res, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}

	// A base image alone is pulled (imageName), logs optional.
	pulled, err := c.BuildSnapshot(ctx, "base-copy", BaseImage("team/base:1"), sandbox.Resources{}, nil)
	if err != nil || pulled.State != SnapshotActive || pulled.ImageName != "team/base:1" {
		t.Errorf("pull: %+v, %v", pulled, err)
	}

	// A failing step: the typed error with the builder's reason.
	logs.Reset()
	_, err = c.BuildSnapshot(ctx, "broken", ImageFromDockerfile("FROM team/base:1\nRUN echo about-to-fail && exit 3\n"), sandbox.Resources{}, &logs)
	var fe *SnapshotFailedError
	if !errors.As(err, &fe) || fe.Name != "broken" || fe.State != SnapshotBuildFailed || fe.Reason == "" {
		t.Fatalf("a failing build: %v, want a *SnapshotFailedError with a reason", err)
	}
	if !strings.Contains(logs.String(), "about-to-fail") {
		t.Errorf("the failing build's logs %q", logs.String())
	}

	page, err := c.ListSnapshots(ctx, "", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range page.Items {
		names = append(names, it.Name)
	}
	for _, want := range []string{"tools:1", "base-copy", "broken"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("list %v lacks %s", names, want)
		}
	}
	for _, name := range []string{"tools:1", "base-copy", "broken"} {
		if err := c.DeleteSnapshot(ctx, name); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
		if _, err := c.GetSnapshot(ctx, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s after delete: %v, want ErrNotFound", name, err)
		}
	}
	if err := c.DeleteSnapshot(ctx, "tools:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a deleted snapshot: %v, want ErrNotFound", err)
	}

	// Bad input fails before any request.
	for _, tc := range []struct {
		name string
		img  Image
		res  sandbox.Resources
	}{
		{"", BaseImage("team/base:1"), sandbox.Resources{}},
		{"has space", BaseImage("team/base:1"), sandbox.Resources{}},
		{"ok", BaseImage("team/base:1").Workdir("rel"), sandbox.Resources{}},
		{"ok", BaseImage("team/base:1"), sandbox.Resources{CPUCores: -1}},
	} {
		if _, err := c.BuildSnapshot(ctx, tc.name, tc.img, tc.res, nil); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("BuildSnapshot(%q, %q, %+v): %v, want ErrInvalidArgument", tc.name, tc.img.Dockerfile(), tc.res, err)
		}
	}
	if _, err := c.GetSnapshot(ctx, "ok"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an invalid build created something: %v", err)
	}
}
