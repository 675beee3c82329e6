package server

import (
	"slices"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// Over the local engine, a create of a pool's snapshot takes a spare
// that is a real sandbox of the snapshot: it answers started, has the
// snapshot's files and runs commands; the pool refills; a restarted
// server takes the spares back, and deleting the pool removes them (the
// state dir's check finds nothing left).
func TestLocalWarmPool(t *testing.T) {
	dir, _ := localStoreWith(t, warmSnapshot)
	eng := localEngine{stateDir: dir}
	h := newHarness(t, eng, harnessOptions{published: []string{warmSnapshot}})
	p := h.createPool(warmSnapshot, 1)
	h.waitPool(p.ID, 1)
	spare := h.spareIDs(p.ID)[0]
	sb := h.create(map[string]any{"name": "warm", "snapshot": warmSnapshot})
	if sb.ID != spare || sb.State != stateStarted {
		t.Fatalf("create answered %s %s, want the spare %s started", sb.ID, sb.State, spare)
	}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out := exec(t, c, "cat /etc/os-release; echo $USER"); out != testrootfs.OSRelease+"daytona\n" {
		t.Errorf("/etc/os-release and user in the taken spare: %q", out)
	}
	h.waitPool(p.ID, 1)
	spares := h.spareIDs(p.ID)
	closeServer(t, h)

	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir, published: []string{warmSnapshot}})
	if got := h2.spareIDs(p.ID); !slices.Equal(got, spares) {
		t.Errorf("spares after a restart: %v, want %v", got, spares)
	}
	h2.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
	h2.waitState(sb.ID, "gone")
	h2.call("DELETE", "/warm-pools/"+p.ID, nil, nil)
}
