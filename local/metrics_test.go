//go:build linux

package local_test

import (
	"context"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
)

// TestMetricsSeeSandboxLimits: GET /system/metrics inside a sandbox reports
// the sandbox's memory limit and the CPU it may use, not the host's.
func TestMetricsSeeSandboxLimits(t *testing.T) {
	sb := limitedSandbox(t, local.Resources{CPUCores: 1, MemoryMiB: 256}, local.Config{})
	m, err := sb.Client().SystemMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m.MemTotal != 256<<20 {
		t.Errorf("memTotal %d, want the sandbox's 256 MiB (%d)", m.MemTotal, 256<<20)
	}
	if m.MemUsed <= 0 || m.MemUsed >= m.MemTotal {
		t.Errorf("memUsed %d of %d: not the sandbox's use", m.MemUsed, m.MemTotal)
	}
	if m.CPUCount != 1 {
		t.Errorf("cpuCount %d, want the sandbox's 1 core", m.CPUCount)
	}
}
