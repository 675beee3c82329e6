package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// TestDropCapabilities: with DropCapabilities every command, session or
// one-shot, starts with empty capability sets and no_new_privs, while the
// server process keeps its own.
func TestDropCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: an unprivileged process has no capabilities to drop")
	}
	e := newEnv(t, true, func(o *Options) { o.DropCapabilities = true })
	const probe = "grep -E '^(CapPrm|CapEff|CapBnd|CapInh|CapAmb|NoNewPrivs):' /proc/self/status"
	check := func(name, out string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 6 {
			t.Fatalf("%s: unexpected status lines %q", name, out)
		}
		for _, line := range lines {
			f := strings.Fields(line)
			want := "0000000000000000"
			if f[0] == "NoNewPrivs:" {
				want = "1"
			}
			if len(f) != 2 || f[1] != want {
				t.Errorf("%s: %q, want %s", name, line, want)
			}
		}
	}
	var one toolbox.ExecuteResponse
	if err := json.Unmarshal(e.expect(http.StatusOK, "POST", "/process/execute", toolbox.ExecuteRequest{Command: probe}), &one); err != nil {
		t.Fatal(err)
	}
	check("one-shot", one.Result)

	e.createSession("caps")
	r := e.execSync("caps", probe)
	if r.Stdout == nil {
		t.Fatalf("no stdout in %+v", r)
	}
	check("session", *r.Stdout)

	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(own), "CapEff:\t0000000000000000") {
		t.Error("the server process itself lost its capabilities")
	}
}
