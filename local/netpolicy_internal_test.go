//go:build linux

package local

import (
	"encoding/json"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestMetaLegacyNetwork: metadata written before sandbox.NetworkPolicy
// (Daytona's wire fields and HostNetwork in "options") loads with the
// same policy, in canonical form, and is written back in the current
// form.
func TestMetaLegacyNetwork(t *testing.T) {
	for _, c := range []struct {
		options string
		want    string // NetworkPolicy.String
	}{
		{`{"user":"agent"}`, "public"},
		{`{"networkBlockAll":true}`, "blocked"},
		{`{"networkAllowList":"203.0.113.0/24,198.51.100.7/32"}`, "allowList 203.0.113.0/24,198.51.100.7/32"},
		{`{"domainAllowList":"example.com,*.example.org"}`, "domainAllowList example.com,*.example.org"},
		{`{"networkAllowList":"203.0.113.0/24","domainAllowList":"example.com"}`, "allowList 203.0.113.0/24 example.com"},
		{`{"hostNetwork":true}`, "host"},
		{`{"network":{"mode":"blocked"},"networkAllowList":"203.0.113.0/24"}`, "blocked"},
	} {
		var m meta
		if err := json.Unmarshal([]byte(`{"id":"x","options":`+c.options+`}`), &m); err != nil {
			t.Errorf("%s: %v", c.options, err)
			continue
		}
		if got := m.Config.Network.String(); got != c.want {
			t.Errorf("%s: policy %q, want %q", c.options, got, c.want)
		}
		if m.ID != "x" || (c.options == `{"user":"agent"}` && m.Config.User != "agent") {
			t.Errorf("%s: meta %+v", c.options, m)
		}
		b, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		var again meta
		if err := json.Unmarshal(b, &again); err != nil || !again.Config.Network.Equal(m.Config.Network) {
			t.Errorf("%s: written back as %s, read %+v, %v", c.options, b, again.Config.Network, err)
		}
	}
	var m meta
	if err := json.Unmarshal([]byte(`{"options":{"networkAllowList":"nonsense"}}`), &m); err == nil {
		t.Errorf("a bad legacy allow list loaded: %+v", m.Config.Network)
	}
	if p := (sandbox.NetworkPolicy{}); !p.IsZero() {
		t.Error("the zero policy is not zero")
	}
}
