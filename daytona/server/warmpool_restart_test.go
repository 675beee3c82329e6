package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// waitLocalCount polls the state dir until it has want sandboxes.
func waitLocalCount(t *testing.T, dir string, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		infos, err := local.List(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state dir has %d sandboxes, want %d", len(infos), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A serve killed with SIGKILL while its pool's spares are being created,
// and again once they are ready, keeps the pool at its size: the next
// serve removes the half-made spares, takes back the ready ones and
// refills, so that the state dir holds exactly the pool's spares; a
// delete of the pool then removes them all.
func TestKilledServeKeepsWarmPools(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	var mu sync.Mutex
	serve := startServe(t, dir)
	h := processHarness(t, func() string { mu.Lock(); defer mu.Unlock(); return serve.url })
	restart := func() {
		serve.kill(t)
		next := startServe(t, dir)
		mu.Lock()
		serve = next
		mu.Unlock()
	}

	p := h.createPool(DefaultSnapshot, 2)
	restart() // the spares were being created
	got := h.waitPool(p.ID, 2)
	if got.Pool != 2 || got.Snapshot != DefaultSnapshot {
		t.Fatalf("pool after a kill: %+v", got)
	}
	waitLocalCount(t, dir, 2)

	restart() // the spares were ready
	if ps := h.pools(); len(ps) != 1 || ps[0].ID != p.ID || ps[0].Pool != 2 {
		t.Fatalf("pools after a second kill: %+v", ps)
	}
	h.waitPool(p.ID, 2)
	waitLocalCount(t, dir, 2)

	h.call("DELETE", "/warm-pools/"+p.ID, nil, nil)
	waitLocalCount(t, dir, 0)
}
