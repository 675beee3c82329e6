package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// idRanges returns the first host uid of each range of the id pool of
// stateDir, by key.
func idRanges(t *testing.T, stateDir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "hostids.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Ranges map[string]struct{ First int } `json:"ranges"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for k, r := range p.Ranges {
		out[k] = r.First
	}
	return out
}

// With a pool (serve --pool), a sandbox created through the API takes the
// pool's spare init: it gets the spare's uid range and runs commands as
// any other.
func TestLocalEnginePool(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	pool, err := local.NewPool(local.PoolOptions{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
		for key := range idRanges(t, dir) {
			if strings.HasPrefix(key, "spare:") {
				t.Errorf("id pool after the pool closed: %s left", key)
			}
		}
	})
	if err := pool.Fill(context.Background()); err != nil {
		t.Fatal(err)
	}
	spare := -1
	for key, first := range idRanges(t, dir) {
		if strings.HasPrefix(key, "spare:") {
			spare = first
		}
	}
	if spare < 0 {
		t.Fatalf("no spare range after Fill: %v", idRanges(t, dir))
	}
	h := newHarness(t, localEngine{stateDir: dir, pool: pool}, harnessOptions{stateDir: dir})
	sb := h.create(map[string]any{"name": "pooled", "env": map[string]string{"GREETING": "hello"}})
	h.waitState(sb.ID, stateStarted)
	if got := idRanges(t, dir)[sb.ID]; got != spare {
		t.Errorf("the sandbox's uid range starts at %d, not at the spare's %d", got, spare)
	}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out := exec(t, c, `echo "$USER $HOME $GREETING"`); out != "daytona /home/daytona hello\n" {
		t.Errorf("a pooled sandbox's user, home and env: %q", out)
	}
	h.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
	h.waitState(sb.ID, "gone")
}
