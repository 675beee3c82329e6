package sdktest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
)

// createAnswers records the state of every answer of serve to a sandbox
// create.
type createAnswers struct {
	mu     sync.Mutex
	states []string
}

// wrap returns next recording the answers of POST /api/sandbox.
func (c *createAnswers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/sandbox" {
			next.ServeHTTP(w, r)
			return
		}
		tw := &teeWriter{ResponseWriter: w}
		next.ServeHTTP(tw, r)
		var sb struct{ State string }
		_ = json.Unmarshal(tw.body.Bytes(), &sb)
		c.mu.Lock()
		c.states = append(c.states, sb.State)
		c.mu.Unlock()
	})
}

// teeWriter keeps a copy of the body it writes.
type teeWriter struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.body.Write(p)
	return w.ResponseWriter.Write(p)
}

// TestTypeScriptSDKWarmPool has the SDK release that has
// daytona.warmPool (0.218) drive serve's warm pools
// (testdata/node/warmpool.mjs): a pool of a snapshot created and filled,
// a sandbox of the snapshot created from it (serve answered its create
// started: it took the spare) with the snapshot's files, the pool
// refilled, drained and deleted.
func TestTypeScriptSDKWarmPool(t *testing.T) {
	p := findNode(t)
	dir := t.TempDir()
	st, err := local.OpenImageStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	testrootfs.SaveImage(t, st, testBaseImage)
	answers := &createAnswers{}
	base, offSpec := startServe(t, dir, answers.wrap)
	const alias = "sdk-latest"
	if _, err := os.Stat(filepath.Join(p.dir, "node_modules", alias, "esm", "WarmPool.js")); err != nil {
		t.Fatalf("SDK %s has no WarmPool service: %v", p.versions[alias], err)
	}
	runProgram(t, p, "warmpool.mjs", base, alias, []wantStep{
		{"pool-create", `{"snapshot":"` + testBaseImage + `","pool":1,"osUser":"daytona"}`},
		{"pool-ready", `1`},
		{"create-from-pool", `{"state":"started","snapshot":"` + testBaseImage + `","os":` + jsonString(testrootfs.OSRelease) + `}`},
		{"pool-refilled", `1`},
		{"pool-drain", `0`},
		{"pool-delete", `[]`},
		{"delete", `"destroying"`},
	}, "AGENTBOX_BASE_IMAGE="+testBaseImage)
	answers.mu.Lock()
	states := slices.Clone(answers.states)
	answers.mu.Unlock()
	if !slices.Equal(states, []string{"started"}) {
		t.Errorf("serve answered the SDK's creates with states %v, want [started] (a spare taken)", states)
	}
	t.Run("spec", func(t *testing.T) { offSpec.report(t) })
}
