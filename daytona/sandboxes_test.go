package daytona

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestSandboxLifecycle(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	s := newServe(t, &server.Knobs{Headers: true})
	c := s.client(Config{Target: "local"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	stop := 5
	sb, err := c.CreateAndWait(ctx, CreateSandbox{
		Name: "lifecycle", Labels: map[string]string{"suite": "client"}, AutoStopInterval: &stop,
		Env: map[string]string{"GREETING": "hi"},
	}, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteAndWait(context.Background(), sb.ID) })
	if sb.State != StateStarted || sb.Name != "lifecycle" || sb.User != "daytona" || sb.Target != "local" || sb.AutoStopInterval != 5 || sb.Created().IsZero() {
		t.Fatalf("created: %+v", sb)
	}
	if sb.ToolboxProxyURL == "" {
		t.Fatal("no toolbox proxy URL")
	}
	if u, err := c.ToolboxProxyURL(ctx, sb.ID); err != nil || u != sb.ToolboxProxyURL {
		t.Errorf("toolbox proxy URL %q, %v; the DTO says %q", u, err, sb.ToolboxProxyURL)
	}
	byName, err := c.GetSandbox(ctx, "lifecycle")
	if err != nil || byName.ID != sb.ID || byName.Env["GREETING"] != "hi" {
		t.Fatalf("get by name: %+v, %v", byName, err)
	}
	var listed []string
	for item, err := range c.Sandboxes(ctx, ListOptions{Labels: map[string]string{"suite": "client"}, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, item.ID)
	}
	if len(listed) != 1 || listed[0] != sb.ID {
		t.Fatalf("listed by label: %v", listed)
	}
	labels := map[string]string{"suite": "client", "step": "labels"}
	if got, err := c.SetLabels(ctx, sb.ID, labels); err != nil || !maps.Equal(got, labels) {
		t.Fatalf("labels: %v, %v", got, err)
	}
	block := true
	if got, err := c.UpdateNetworkSettings(ctx, sb.ID, NetworkSettings{NetworkBlockAll: &block}); err != nil || !got.NetworkBlockAll {
		t.Fatalf("network settings: %+v, %v", got, err)
	}
	if got, err := c.SetAutoStopInterval(ctx, sb.ID, 0); err != nil || got.AutoStopInterval != 0 {
		t.Fatalf("autostop: %+v, %v", got, err)
	}
	if got, err := c.SetAutoDeleteInterval(ctx, sb.ID, -1); err != nil || got.AutoDeleteInterval != -1 {
		t.Fatalf("autodelete: %+v, %v", got, err)
	}
	if p, err := c.PreviewURL(ctx, sb.ID, 8080); err != nil || p.URL == "" || p.Token == "" {
		t.Fatalf("preview URL: %+v, %v", p, err)
	}

	if got, err := c.StopAndWait(ctx, sb.ID, false); err != nil || got.State != StateStopped {
		t.Fatalf("stop: %+v, %v", got, err)
	}
	if _, err := c.ArchiveSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := c.WaitForState(ctx, sb.ID, StateArchived); err != nil || got.State != StateArchived {
		t.Fatalf("archive: %+v, %v", got, err)
	}
	if got, err := c.StartAndWait(ctx, sb.ID); err != nil || got.State != StateStarted {
		t.Fatalf("start: %+v, %v", got, err)
	}
	// A start of a started sandbox changes nothing.
	if got, err := c.StartAndWait(ctx, sb.ID); err != nil || got.State != StateStarted {
		t.Fatalf("second start: %+v, %v", got, err)
	}
	// Deleted behind the client's back: a wait for started reports it.
	gone := s.client(Config{Header: map[string][]string{server.HeaderTestFault: {"delete;times=1;key=lifecycle"}}})
	if _, err := gone.GetSandbox(ctx, sb.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted behind the back: %v, want ErrNotFound", err)
	}
	if _, err := c.WaitForState(ctx, sb.ID, StateStarted); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("waiting for a deleted sandbox: %v", err)
	}
	if got, err := c.WaitForState(ctx, sb.ID, StateDestroyed); err != nil || got.State != StateDestroyed {
		t.Fatalf("waiting for destroyed: %+v, %v", got, err)
	}
}

func TestVolumes(t *testing.T) {
	noDaytonaEnv(t)
	s := newServe(t, nil)
	c := s.client(Config{})
	ctx := context.Background()
	v, err := c.GetOrCreateVolume(ctx, "data")
	if err != nil || v.Name != "data" || v.ID == "" {
		t.Fatalf("get or create: %+v, %v", v, err)
	}
	again, err := c.GetOrCreateVolume(ctx, "data")
	if err != nil || again.ID != v.ID {
		t.Fatalf("second get or create: %+v, %v", again, err)
	}
	if got, err := c.GetVolume(ctx, v.ID); err != nil || got.Name != "data" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	list, err := c.ListVolumes(ctx)
	if err != nil || len(list) != 1 || list[0].ID != v.ID {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := c.DeleteVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetVolumeByName(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown volume: %v", err)
	}
}
