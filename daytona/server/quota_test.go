package server

import (
	"net/http"
	"strings"
	"testing"
)

// An organization at its quota of sandboxes is refused a create with 403
// naming the quota and how to raise it; another organization still
// creates.
func TestSandboxQuotaPerOrg(t *testing.T) {
	dir := t.TempDir()
	tenant := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir, maxSandboxes: 2})
	for range 2 {
		h.create(map[string]any{})
	}
	var e apiError
	if st := h.call("POST", "/sandbox", map[string]any{}, &e); st != http.StatusForbidden ||
		!strings.Contains(e.Message, "quota") || !strings.Contains(e.Message, "--max-sandboxes-per-org") {
		t.Fatalf("a create past the quota: %d %+v, want 403 naming the quota", st, e)
	}
	var sb apiSandbox
	if st := h.callKey(tenant, "POST", "/sandbox", map[string]any{}, &sb); st != http.StatusOK {
		t.Fatalf("another organization's create: %d, want 200", st)
	}
	var list struct{ Items []apiSandbox }
	h.call("GET", "/sandbox", nil, &list)
	if len(list.Items) != 2 {
		t.Fatalf("the organization at its quota has %d sandboxes, want 2", len(list.Items))
	}
}
