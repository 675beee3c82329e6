package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// summaryEngine is the fake engine with a SummaryLister that lists one
// sandbox of its own, "summary", and counts its calls.
type summaryEngine struct {
	*fakeEngine
	calls int
}

func (e *summaryEngine) ListSummaries(context.Context, string) ([]sandbox.Info, error) {
	e.calls++
	return []sandbox.Info{{ID: "summary", Status: sandbox.StatusStopped, CreatedAt: time.Now().Add(-time.Hour)}}, nil
}

// TestSandboxLsUsesSummaries: the table of 'sandbox ls' comes from the
// engine's ListSummaries when it has one; --json, which prints every
// field, from List.
func TestSandboxLsUsesSummaries(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--id", "full", "true")
	e := &summaryEngine{fakeEngine: h.e}

	r := runWith(e, "sandbox", "ls")
	if r.code != 0 || e.calls != 1 {
		t.Fatalf("sandbox ls: %v, ListSummaries called %d times", r, e.calls)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "summary ") || !strings.Contains(lines[1], "stopped") || !strings.Contains(lines[1], "1h ago") {
		t.Errorf("sandbox ls printed %q, want the header and the summary's row", r.stdout)
	}

	r = runWith(e, "--json", "sandbox", "ls")
	var infos []sandbox.Info
	if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil || r.code != 0 {
		t.Fatalf("--json sandbox ls: %v: %v", r, err)
	}
	if e.calls != 1 || len(infos) != 1 || infos[0].ID != "full" || infos[0].Metadata["k"] != "v" {
		t.Errorf("--json sandbox ls: %+v (ListSummaries calls %d), want List's full Info of sandbox full", infos, e.calls)
	}
}
