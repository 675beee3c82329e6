package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestExecResourceFlags: --cpu, --memory, --disk and --pids shape a new
// sandbox, each read by sandbox's parser; a bad value is a usage error
// naming the flag and saying what to write.
func TestExecResourceFlags(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--id", "sized", "--cpu", "0.5", "--memory", "2GiB", "--disk", "512", "--pids", "100", "--", "true")
	want := sandbox.Resources{CPUCores: 0.5, MemoryMiB: 2048, DiskMiB: 512, PIDs: 100}
	if len(h.e.opened) != 1 || !reflect.DeepEqual(h.e.opened[0], OpenOptions{StateDir: h.e.defaultDir, ID: "sized", Resources: want}) {
		t.Errorf("opened %+v, want resources %+v", h.e.opened, want)
	}
	for _, c := range []struct{ flag, value, says string }{
		{"--memory", "2GB", "ambiguous"},
		{"--memory", "lots", "512MiB or 2GiB"},
		{"--disk", "0", "positive whole number of MiB"},
		{"--cpu", "-1", "number of CPU cores"},
		{"--pids", "1.5", "positive number of processes"},
	} {
		r := h.run("exec", "--id", "bad", c.flag, c.value, "--", "true")
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.flag) || !strings.Contains(r.stderr, c.says) || strings.Contains(r.stderr, "invalid argument: ") {
			t.Errorf("%s %s: %v, want a usage error naming the flag and saying %q", c.flag, c.value, r, c.says)
		}
	}
	if len(h.e.opened) != 1 {
		t.Errorf("a bad flag opened a sandbox: %+v", h.e.opened)
	}
}

// TestNetworkFlagsParse: the network command reads its lists with
// sandbox's parsers, in canonical form, and names the flag of a bad one.
func TestNetworkFlagsParse(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--id", "default", "--", "true")
	r := h.must("--json", "sandbox", "network", "default", "--allow-cidr", " 203.0.113.7,203.0.113.7 ,2001:DB8::/32", "--allow-domain", "PyPI.org.")
	for _, w := range []string{`"203.0.113.7/32"`, `"2001:db8::/32"`, `"pypi.org"`, `"mode": "allowList"`} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("network: %s lacks %s", r.stdout, w)
		}
	}
	for _, c := range []struct{ flag, value, says string }{
		{"--allow-cidr", "nonsense", "not a CIDR"},
		{"--allow-cidr", "203.0.113.1/24", "did you mean 203.0.113.0/24"},
		{"--allow-domain", "a b", "not allowed in a name"},
		{"--allow-cidr", " , ", "list nothing"},
	} {
		if r := h.run("sandbox", "network", "default", c.flag, c.value); r.code != ExitUsage || !strings.Contains(r.stderr, c.flag) || !strings.Contains(r.stderr, c.says) {
			t.Errorf("%s %q: %v, want a usage error naming the flag and saying %q", c.flag, c.value, r, c.says)
		}
	}
}
