package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// With the local engine, a create from buildInfo builds the Dockerfile
// with the local image builder (its RUN steps in sandboxes, their output
// in the build logs) and makes the sandbox of the image; a snapshot made
// from an image name makes sandboxes too, and its delete keeps the image.
func TestLocalBuild(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	ctx := context.Background()
	st, err := local.OpenImageStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pull(ctx, testrootfs.Make(t), image.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	img, err := st.List(ctx)
	if err != nil || len(img) != 1 {
		t.Fatalf("the store: %v %v", img, err)
	}
	if _, err := st.Save(ctx, &image.Image{Names: []string{"team/tools:1"}, Layers: img[0].Layers, Config: img[0].Config}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{})

	sb := h.create(map[string]any{"name": "built", "buildInfo": map[string]any{
		"dockerfileContent": "FROM team/tools:1\nRUN echo built > /built && echo from-the-run-step\n",
	}})
	if sb.State != statePendingBuild {
		t.Fatalf("create answered %q", sb.State)
	}
	logs := h.buildLogs("/sandbox/built/build-logs", true)
	if !strings.Contains(logs, "FROM team/tools:1") || !strings.Contains(logs, "from-the-run-step\n") {
		t.Fatalf("build logs %q: want the steps and the RUN's output", logs)
	}
	h.waitState(sb.ID, stateStarted)
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out := exec(t, c, "cat /built /etc/os-release"); out != "built\n"+testrootfs.OSRelease {
		t.Errorf("a sandbox of the built image: %q", out)
	}

	var snap snapshotDTO
	if code := h.call("POST", "/snapshots", map[string]any{"name": "tools-snap", "imageName": "team/tools:1"}, &snap); code != http.StatusOK {
		t.Fatalf("create snapshot: %d", code)
	}
	h.waitSnapshot("tools-snap", snapshotActive)
	other := h.create(map[string]any{"snapshot": "tools-snap"})
	h.waitState(other.ID, stateStarted)
	for _, id := range []string{sb.ID, other.ID} {
		h.call("DELETE", "/sandbox/"+id, nil, nil)
		h.waitState(id, "gone")
	}
	if code := h.call("DELETE", "/snapshots/tools-snap", nil, nil); code != http.StatusOK {
		t.Fatalf("delete snapshot: %d", code)
	}
	if _, err := st.Get(ctx, "tools-snap"); err == nil {
		t.Error("the snapshot's name is still in the store")
	}
	if _, err := st.Get(ctx, "team/tools:1"); err != nil {
		t.Errorf("the image the snapshot was made of: %v", err)
	}
}
