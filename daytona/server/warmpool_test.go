package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// warmSnapshot is the published image the warm pools of these tests keep
// spares of.
const warmSnapshot = "team/tools:1"

// newWarmHarness returns a harness over an image fake that has
// warmSnapshot, and the fake.
func newWarmHarness(t *testing.T, o harnessOptions) (*harness, *imageFake) {
	t.Helper()
	eng := newImageFake(t, warmSnapshot)
	return newHarness(t, eng, o), eng
}

// createPool creates a warm pool of snapshot with size, failing the test
// unless the answer is 201.
func (h *harness) createPool(snapshot string, size int) warmPoolDTO {
	h.t.Helper()
	var p warmPoolDTO
	if st := h.call("POST", "/warm-pools", map[string]any{"snapshot": snapshot, "pool": size}, &p); st != http.StatusCreated {
		h.t.Fatalf("create warm pool: status %d", st)
	}
	return p
}

// pools lists the warm pools of the test key's organization.
func (h *harness) pools() []warmPoolDTO {
	h.t.Helper()
	var ps []warmPoolDTO
	if st := h.call("GET", "/warm-pools", nil, &ps); st != http.StatusOK {
		h.t.Fatalf("list warm pools: status %d", st)
	}
	return ps
}

// waitPool polls pool id until it has want ready spares.
func (h *harness) waitPool(id string, want int) warmPoolDTO {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, p := range h.pools() {
			if p.ID == id && p.CurrentSize == want {
				return p
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("warm pool %s: never had %d spares ready: %+v", id, want, h.pools())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// spareIDs returns the ready spares of pool id, as the server has them.
func (h *harness) spareIDs(id string) []string {
	h.s.warm.mu.Lock()
	defer h.s.warm.mu.Unlock()
	return slices.Clone(h.s.warm.byID[id].spares)
}

// boxCount returns how many sandboxes the fake engine has.
func (e *fakeEngine) boxCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.boxes)
}

// waitBoxes polls the fake engine until it has want sandboxes.
func waitBoxes(t *testing.T, e *fakeEngine, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.boxCount() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the engine has %d sandboxes, want %d", e.boxCount(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readyPool returns a harness whose warm pool of warmSnapshot has size
// spares ready, the fake, the pool and its oldest spare's id.
func readyPool(t *testing.T, size int) (*harness, *imageFake, warmPoolDTO, string) {
	t.Helper()
	h, eng := newWarmHarness(t, harnessOptions{})
	p := h.createPool(warmSnapshot, size)
	h.waitPool(p.ID, size)
	return h, eng, p, h.spareIDs(p.ID)[0]
}

// Create answers 201 with the pool; list has it; update changes its size;
// delete answers 204 and the list no longer has it.
func TestWarmPoolRoutes(t *testing.T) {
	h, _ := newWarmHarness(t, harnessOptions{})
	p := h.createPool(warmSnapshot, 1)
	if p.Snapshot != warmSnapshot || p.Pool != 1 || p.Org != DefaultOrganizationID || p.Target != DefaultTarget || p.OSUser != DefaultUser || p.ID == "" {
		t.Fatalf("create answered %+v", p)
	}
	if ps := h.pools(); len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("list after create: %+v", ps)
	}
	var up warmPoolDTO
	if st := h.call("PATCH", "/warm-pools/"+p.ID, map[string]any{"pool": 3}, &up); st != http.StatusOK || up.Pool != 3 || up.ID != p.ID {
		t.Fatalf("update: %d %+v", st, up)
	}
	if ps := h.pools(); len(ps) != 1 || ps[0].Pool != 3 {
		t.Fatalf("list after update: %+v", ps)
	}
	if st := h.call("DELETE", "/warm-pools/"+p.ID, nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d", st)
	}
	if ps := h.pools(); len(ps) != 0 {
		t.Fatalf("list after delete: %+v", ps)
	}
}

// Bad input is refused with a clear error, and creates nothing: no pool,
// no spare.
func TestWarmPoolBadInput(t *testing.T) {
	dir := t.TempDir()
	other := newOrgKey(t, dir, "other", "team-other")
	h, eng := newWarmHarness(t, harnessOptions{stateDir: dir, badRequests: true})
	for _, c := range []struct {
		body any
		want int
		msg  string
	}{
		{map[string]any{"snapshot": "team/nope:1", "pool": 1}, http.StatusBadRequest, "not found"},
		{map[string]any{"pool": 1}, http.StatusBadRequest, "snapshot is required"},
		{map[string]any{"snapshot": warmSnapshot}, http.StatusBadRequest, "pool is required"},
		{map[string]any{"snapshot": warmSnapshot, "pool": 0}, http.StatusBadRequest, "from 1 to 10"},
		{map[string]any{"snapshot": warmSnapshot, "pool": -1}, http.StatusBadRequest, "from 1 to 10"},
		{map[string]any{"snapshot": warmSnapshot, "pool": 11}, http.StatusBadRequest, "from 1 to 10"},
		{map[string]any{"snapshot": warmSnapshot, "pool": 1.5}, http.StatusBadRequest, "whole number"},
		{`{"snapshot": 3}`, http.StatusBadRequest, "snapshot must be"},
	} {
		var e apiError
		if st := h.call("POST", "/warm-pools", c.body, &e); st != c.want || !strings.Contains(e.Message, c.msg) {
			t.Errorf("create %v: %d %q, want %d with %q", c.body, st, e.Message, c.want, c.msg)
		}
	}
	p := h.createPool(warmSnapshot, 1)
	var e apiError
	if st := h.call("POST", "/warm-pools", map[string]any{"snapshot": warmSnapshot, "pool": 1}, &e); st != http.StatusConflict {
		t.Errorf("a second pool of the snapshot: %d %+v, want 409", st, e)
	}
	for _, size := range []any{-1, 11, "two"} {
		if st := h.call("PATCH", "/warm-pools/"+p.ID, map[string]any{"pool": size}, &e); st != http.StatusBadRequest {
			t.Errorf("update to %v: %d, want 400", size, st)
		}
	}
	if st := h.call("PATCH", "/warm-pools/nope", map[string]any{"pool": 1}, &e); st != http.StatusNotFound {
		t.Errorf("update of a missing pool: %d, want 404", st)
	}
	// Another organization sees none of it.
	if st := h.callKey(other, "PATCH", "/warm-pools/"+p.ID, map[string]any{"pool": 2}, &e); st != http.StatusNotFound {
		t.Errorf("another organization's update: %d, want 404", st)
	}
	if st := h.callKey(other, "DELETE", "/warm-pools/"+p.ID, nil, &e); st != http.StatusNotFound {
		t.Errorf("another organization's delete: %d, want 404", st)
	}
	var ps []warmPoolDTO
	if h.callKey(other, "GET", "/warm-pools", nil, &ps); len(ps) != 0 {
		t.Errorf("another organization lists %+v", ps)
	}
	if ps := h.pools(); len(ps) != 1 || ps[0].Pool != 1 {
		t.Errorf("pools after the bad requests: %+v", ps)
	}
	// Only the one pool's one spare was made.
	h.waitPool(p.ID, 1)
	if n := eng.called("create"); n != 1 {
		t.Errorf("the engine created %d sandboxes, want the one spare", n)
	}
}

// The spares of an organization's pools count against its sandbox
// quota: a pool past it is 403, and nothing is created.
func TestWarmPoolQuota(t *testing.T) {
	h, _ := newWarmHarness(t, harnessOptions{maxSandboxes: 3})
	p := h.createPool(warmSnapshot, 2)
	var e apiError
	if st := h.call("POST", "/warm-pools", map[string]any{"snapshot": DefaultSnapshot, "pool": 2}, &e); st != http.StatusForbidden || !strings.Contains(e.Message, "quota") {
		t.Errorf("a pool past the quota: %d %+v, want 403", st, e)
	}
	if st := h.call("PATCH", "/warm-pools/"+p.ID, map[string]any{"pool": 4}, &e); st != http.StatusForbidden {
		t.Errorf("an update past the quota: %d, want 403", st)
	}
	if ps := h.pools(); len(ps) != 1 || ps[0].Pool != 2 {
		t.Errorf("pools: %+v", ps)
	}
}

// A create of the pool's snapshot takes a spare: it answers started, with
// the spare's id, made of the snapshot; the pool's ready count drops,
// then the pool refills; the sandbox runs commands.
func TestWarmPoolCreateTakesSpare(t *testing.T) {
	h, eng, p, spare := readyPool(t, 1)
	release := eng.block("create") // the refill waits
	sb := h.create(map[string]any{"name": "warm", "snapshot": warmSnapshot, "labels": map[string]string{"code-toolbox-language": "python"}})
	if sb.ID != spare || sb.State != stateStarted || sb.Name != "warm" || sb.Snapshot != warmSnapshot {
		t.Fatalf("create answered id %s state %s name %s snapshot %s, want the spare %s started", sb.ID, sb.State, sb.Name, sb.Snapshot, spare)
	}
	if got := h.waitPool(p.ID, 0); got.CurrentSize != 0 {
		t.Fatalf("pool after the take: %+v", got)
	}
	release()
	h.waitPool(p.ID, 1)
	if ids := h.spareIDs(p.ID); slices.Contains(ids, sb.ID) {
		t.Fatalf("the pool still lists the taken spare: %v", ids)
	}
	eng.mu.Lock()
	img := eng.boxes[sb.ID].spec.image
	eng.mu.Unlock()
	if img != warmSnapshot {
		t.Errorf("the taken sandbox is made of %q, want %q", img, warmSnapshot)
	}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out := exec(t, c, "echo warm"); out != "warm\n" {
		t.Errorf("a command in the taken sandbox: %q", out)
	}
}

// Spares are not the organization's sandboxes: list shows none, and a
// get of a spare's id is 404.
func TestWarmPoolSparesInvisible(t *testing.T) {
	h, _ := newWarmHarness(t, harnessOptions{})
	p := h.createPool(warmSnapshot, 2)
	h.waitPool(p.ID, 2)
	var list struct{ Items []apiSandbox }
	if h.call("GET", "/sandbox", nil, &list); len(list.Items) != 0 {
		t.Errorf("list shows %d sandboxes with only spares", len(list.Items))
	}
	if _, st := h.get(h.spareIDs(p.ID)[0]); st != http.StatusNotFound {
		t.Errorf("get of a spare: %d, want 404", st)
	}
}

// A create a spare cannot serve (an environment, another snapshot,
// other sizes) is created as without the pool, and leaves the spares.
func TestWarmPoolCreateThatDoesNotFit(t *testing.T) {
	h, _, p, spare := readyPool(t, 1)
	for i, body := range []map[string]any{
		{"snapshot": warmSnapshot, "env": map[string]string{"A": "1"}},
		{"snapshot": DefaultSnapshot},
		{"snapshot": warmSnapshot, "cpu": 7},
		{"snapshot": warmSnapshot, "user": "alice"},
	} {
		if sb := h.create(body); sb.ID == spare || sb.State != stateCreating {
			t.Errorf("create %d %v took the spare or answered %s", i, body, sb.State)
		}
	}
	if ids := h.spareIDs(p.ID); !slices.Equal(ids, []string{spare}) {
		t.Errorf("spares after creates that do not fit: %v, want [%s]", ids, spare)
	}
}

// A taken spare gets the create's network policy.
func TestWarmPoolNetworkPolicy(t *testing.T) {
	h, eng, _, spare := readyPool(t, 1)
	sb := h.create(map[string]any{"snapshot": warmSnapshot, "networkBlockAll": true})
	if sb.ID != spare || !sb.NetworkBlockAll {
		t.Fatalf("create answered id %s blockAll %v, want the spare %s blocked", sb.ID, sb.NetworkBlockAll, spare)
	}
	if got := eng.networkOf(sb.ID); got.Mode != sandbox.NetworkBlocked {
		t.Errorf("the taken spare's network: %+v, want blocked", got)
	}
}

// Shrinking a pool removes its spare sandboxes past the new size; a
// delete removes the rest.
func TestWarmPoolShrinkAndDeleteRemoveSpares(t *testing.T) {
	h, eng := newWarmHarness(t, harnessOptions{})
	p := h.createPool(warmSnapshot, 3)
	h.waitPool(p.ID, 3)
	if st := h.call("PATCH", "/warm-pools/"+p.ID, map[string]any{"pool": 1}, nil); st != http.StatusOK {
		t.Fatalf("update: %d", st)
	}
	waitBoxes(t, eng.fakeEngine, 1)
	if st := h.call("DELETE", "/warm-pools/"+p.ID, nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d", st)
	}
	waitBoxes(t, eng.fakeEngine, 0)
}

// A restarted server has the pools at their sizes, with the spares that
// kept running: it creates none anew.
func TestWarmPoolSurvivesARestart(t *testing.T) {
	h, eng := newWarmHarness(t, harnessOptions{})
	p := h.createPool(warmSnapshot, 2)
	h.waitPool(p.ID, 2)
	spares := h.spareIDs(p.ID)
	closeServer(t, h)
	created := eng.called("create")

	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	ps := h2.pools()
	if len(ps) != 1 || ps[0].ID != p.ID || ps[0].Pool != 2 || ps[0].CurrentSize != 2 || ps[0].Snapshot != warmSnapshot {
		t.Fatalf("pools after a restart: %+v", ps)
	}
	if got := h2.spareIDs(p.ID); !slices.Equal(got, spares) {
		t.Errorf("spares after a restart: %v, want %v", got, spares)
	}
	if n := eng.called("create"); n != created {
		t.Errorf("the restarted server created %d spares anew", n-created)
	}
}

// A restarted server removes the spares that stopped meanwhile and
// refills its pools to their recorded sizes.
func TestWarmPoolRefillsAfterARestart(t *testing.T) {
	h, eng := newWarmHarness(t, harnessOptions{})
	p := h.createPool(warmSnapshot, 2)
	h.waitPool(p.ID, 2)
	gone := h.spareIDs(p.ID)[0]
	closeServer(t, h)
	eng.behindBack(gone, false) // stopped behind the server's back

	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	h2.waitPool(p.ID, 2)
	if got := h2.spareIDs(p.ID); slices.Contains(got, gone) {
		t.Errorf("spares after a restart %v still have the stopped %s", got, gone)
	}
	waitBoxes(t, eng.fakeEngine, 2)
}

// A spare that stopped behind the server's back is not taken: the create
// takes none (it is created as without the pool), and the pool removes
// the stopped spare and refills.
func TestWarmPoolStoppedSpareNotTaken(t *testing.T) {
	h, eng, p, dead := readyPool(t, 1)
	eng.behindBack(dead, false)
	if sb := h.create(map[string]any{"snapshot": warmSnapshot}); sb.ID == dead || sb.State != stateCreating {
		t.Fatalf("create answered %s %s: took the stopped spare %s", sb.ID, sb.State, dead)
	}
	h.waitPool(p.ID, 1)
	if ids := h.spareIDs(p.ID); slices.Contains(ids, dead) {
		t.Errorf("the pool still has the stopped spare: %v", ids)
	}
}

// A create naming the snapshot by its id takes the spare as by its name.
func TestWarmPoolCreateBySnapshotID(t *testing.T) {
	h, _, _, spare := readyPool(t, 1)
	var list paginatedSnapshots
	h.call("GET", "/snapshots", nil, &list)
	i := slices.IndexFunc(list.Items, func(s snapshotDTO) bool { return s.Name == warmSnapshot })
	if i < 0 {
		t.Fatalf("snapshot %s not listed: %+v", warmSnapshot, list.Items)
	}
	snap := list.Items[i]
	if sb := h.create(map[string]any{"snapshot": snap.ID}); sb.ID != spare || sb.State != stateStarted {
		t.Errorf("create by snapshot id %s answered %s %s, want the spare %s started", snap.ID, sb.ID, sb.State, spare)
	}
}
