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

// TestMetaLegacyResources: resources written before sandbox.Resources
// (cpu, memoryMB, diskMB) load in the current fields, and the current
// form reads back the same.
func TestMetaLegacyResources(t *testing.T) {
	want := Resources{CPUCores: 1.5, MemoryMiB: 512, DiskMiB: 1024, PIDs: 99}
	for _, in := range []string{
		`{"cpu":1.5,"memoryMB":512,"diskMB":1024,"pids":99}`,
		`{"cpuCores":1.5,"memoryMiB":512,"diskMiB":1024,"pids":99}`,
	} {
		var m meta
		if err := json.Unmarshal([]byte(`{"id":"x","options":{"user":"agent","resources":`+in+`}}`), &m); err != nil || m.Config.Resources != want || m.Config.User != "agent" {
			t.Errorf("%s: %+v, %v", in, m.Config, err)
		}
		b, _ := json.Marshal(&m)
		var again meta
		if err := json.Unmarshal(b, &again); err != nil || again.Config.Resources != want {
			t.Errorf("%s: written as %s, read back %+v, %v", in, b, again.Config.Resources, err)
		}
	}
}
