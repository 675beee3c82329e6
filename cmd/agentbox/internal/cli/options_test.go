package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestOptionErrorNamesFlags: an engine's error naming the library's
// options (a *sandbox.OptionError, as local's for the default network
// without root) reaches the user with the CLI's flags in their place, in
// text and under --json; the rest of the message stays.
func TestOptionErrorNamesFlags(t *testing.T) {
	h := newHarness(t)
	oe := sandbox.NewOptionError(sandbox.ErrIsolationUnavailable, "The default network needs root; without root use the blocked mode (",
		sandbox.OptionNetworkBlocked, "), an allow list of domains alone (", sandbox.OptionNetworkDomains,
		") or the host mode (", sandbox.OptionNetworkHost, ")")
	h.e.openErr = fmt.Errorf("sandbox %q: %w", "default", oe)

	r := h.run("exec", "--", "true")
	if r.code != ExitExecFailed {
		t.Fatalf("exec: %v, want exit %d", r, ExitExecFailed)
	}
	for _, s := range []string{"sandbox \"default\": isolation unavailable: The default network needs root", "(--block-network)", "(agentbox sandbox network ID --allow-domain LIST)",
		"(the library's Network.Mode host, which the CLI does not offer)"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr %q does not say %q", r.stderr, s)
		}
	}
	for _, lib := range []string{"Network.Mode blocked", "Network.Domains"} {
		if strings.Contains(r.stderr, lib) {
			t.Errorf("stderr %q names the library's %s", r.stderr, lib)
		}
	}

	r = h.run("--json", "exec", "--", "true")
	var ev errorEvent
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &ev); err != nil {
		t.Fatalf("--json exec: %v: %v", r, err)
	}
	if !strings.Contains(ev.Message, "(--block-network)") || strings.Contains(ev.Message, "Network.Mode blocked") {
		t.Errorf("--json message %q does not name the flag", ev.Message)
	}
}

// TestOptionFlagTable: every option the library names has an entry in
// the CLI's table, a flag where the CLI has one.
func TestOptionFlagTable(t *testing.T) {
	for o, want := range map[sandbox.Option]string{
		sandbox.OptionNetworkBlocked: "--block-network", sandbox.OptionImage: "--image", sandbox.OptionSnapshot: "--snapshot",
		sandbox.OptionReadOnlyRoot: "--read-only-root", sandbox.OptionAllowFUSE: "--allow-fuse", sandbox.OptionDiskMiB: "--disk",
		sandbox.OptionNetworkDomains: "--allow-domain", sandbox.OptionNetworkAllow: "--allow-cidr",
		sandbox.OptionNetworkHost: "does not offer", sandbox.OptionDiskBudgetMB: "does not offer",
	} {
		if got := optionFlag(o); !strings.Contains(got, want) {
			t.Errorf("optionFlag(%q) = %q, want it to say %q", o, got, want)
		}
	}
}
