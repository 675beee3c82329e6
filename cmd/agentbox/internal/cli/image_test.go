package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local/image"
)

func TestImageCommands(t *testing.T) {
	testenv.NeedRoot(t, "needs root: the image store keeps the images' file owners")
	h := newHarness(t)
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("ID=cli-test\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	r := h.must("image", "pull", root)
	if !strings.HasPrefix(r.stdout, "pulled "+root+": ") || !strings.Contains(r.stdout, "1 layer, 12 B") || r.stderr != "" {
		t.Errorf("image pull: %v", r)
	}
	r = h.must("image", "ls")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], root+" ") || !strings.Contains(lines[1], " image ") {
		t.Errorf("image ls: %v", r)
	}
	var imgs []image.Image
	r = h.must("--json", "image", "ls")
	if err := json.Unmarshal([]byte(r.stdout), &imgs); err != nil || len(imgs) != 1 || imgs[0].Names[0] != root || len(imgs[0].Layers) != 1 {
		t.Fatalf("image ls --json: %v (%v)", r, err)
	}

	r = h.run("image", "rm", "nosuch")
	if r.code != ExitError || !strings.Contains(r.stderr, `"nosuch": image not found (see 'agentbox image ls')`) {
		t.Errorf("image rm of an unknown image: %v", r)
	}
	if e := jsonError(t, h.run("--json", "image", "rm", "nosuch").stderr); e.Code != KindNotFound {
		t.Errorf("--json image rm of an unknown image: code %q", e.Code)
	}

	s, err := image.Open(filepath.Join(h.e.defaultDir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold("sandbox-7", root); err != nil {
		t.Fatal(err)
	}
	r = h.run("--json", "image", "rm", root)
	if e := jsonError(t, r.stderr); r.code != ExitError || e.Code != KindInUse || !strings.Contains(e.Message, "sandbox-7") {
		t.Errorf("image rm of a held image: %v", r)
	}
	if err := s.Release("sandbox-7"); err != nil {
		t.Fatal(err)
	}
	if r = h.must("image", "rm", imgs[0].ID[7:19]); r.stdout != "removed "+imgs[0].ID[7:19]+"\n" {
		t.Errorf("image rm by id: %v", r)
	}
	// A build step cached on a layer gone with the image goes with the
	// prune; one whose layer is still there stays.
	cache := filepath.Join(s.Dir(), "build-cache")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, layer := range map[string]string{"gone": filepath.Join(s.Dir(), "layers", "gone"), "kept": ""} {
		entry := `{"layer":"` + layer + `","instruction":"RUN x"}`
		if err := os.WriteFile(filepath.Join(cache, name+".json"), []byte(entry), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r = h.must("--json", "image", "prune")
	var rep struct {
		image.PruneReport
		CacheEntries int `json:"cacheEntries"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Images == nil || len(rep.Layers) != 0 || rep.CacheEntries != 1 {
		t.Errorf("image prune --json: %v (%v); want an empty report (rm removed the layer) and 1 cached build step", r, err)
	}
	if _, err := os.Stat(filepath.Join(cache, "gone.json")); err == nil {
		t.Error("the cached step of a layer gone outlived the prune")
	}
	if _, err := os.Stat(filepath.Join(cache, "kept.json")); err != nil {
		t.Errorf("the cached step without a layer went: %v", err)
	}
	if r = h.must("image", "ls"); strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("image ls after rm: %v", r)
	}
}

func TestImagePullBadReference(t *testing.T) {
	h := newHarness(t)
	r := h.run("image", "pull", "oci:"+filepath.Join(t.TempDir(), "missing"))
	if r.code != ExitError || !strings.Contains(r.stderr, "read OCI layout") || !strings.Contains(r.stderr, "image not found") {
		t.Errorf("pull of a missing OCI layout: %v", r)
	}
	if r = h.run("image", "pull"); r.code != ExitUsage {
		t.Errorf("image pull without a reference: %v", r)
	}
}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		p     image.Progress
		width int
		want  string
	}{
		{image.Progress{Layers: 3, LayersDone: 1, Bytes: 4 << 20, BytesDone: 1 << 20}, 80,
			"alpine [==========>                             ] layers 1/3  1.0 MiB/4.0 MiB"},
		{image.Progress{Layers: 2, LayersDone: 2, BytesDone: 2048}, 60,
			"alpine [==============================] layers 2/2  2.0 KiB"},
		{image.Progress{}, 80, "alpine [========================================] up to date"},
		{image.Progress{Layers: 1}, 20, "alpine layers 0/1  0 B"},
	} {
		if got := progressLine("alpine", tc.p, tc.width); got != tc.want {
			t.Errorf("progressLine(%+v, %d)\n got %q\nwant %q", tc.p, tc.width, got, tc.want)
		}
		if got := progressLine("alpine", tc.p, tc.width); len(got) > tc.width && tc.width >= 40 {
			t.Errorf("line of %d columns for a width of %d", len(got), tc.width)
		}
	}
}
