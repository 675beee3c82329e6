package sandbox_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestParseSizeMiB: plain numbers are MiB, binary units scale, decimal
// and bare-letter units are refused as ambiguous.
func TestParseSizeMiB(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"512", 512}, {"512MiB", 512}, {"512mib", 512}, {" 2GiB ", 2048}, {"2 GiB", 2048},
		{"1.5GiB", 1536}, {"1TiB", 1 << 20}, {"64", 64},
	} {
		if got, err := sandbox.ParseSizeMiB(c.in); err != nil || got != c.want {
			t.Errorf("ParseSizeMiB(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "0", "-1", "2GB", "512MB", "2G", "512M", "0.5", "1.0001GiB", "GiB", "NaN", "Inf", "lots", "1e30TiB"} {
		if got, err := sandbox.ParseSizeMiB(in); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "MiB") {
			t.Errorf("ParseSizeMiB(%q) = %d, %v; want ErrInvalidArgument naming MiB", in, got, err)
		}
	}
}

// TestParseCPUCoresAndPIDs: the parsers of --cpu and --pids.
func TestParseCPUCoresAndPIDs(t *testing.T) {
	for in, want := range map[string]float64{"2": 2, "0.5": 0.5, " 1 ": 1} {
		if got, err := sandbox.ParseCPUCores(in); err != nil || got != want {
			t.Errorf("ParseCPUCores(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "two", "NaN", "+Inf"} {
		if _, err := sandbox.ParseCPUCores(in); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "cores") {
			t.Errorf("ParseCPUCores(%q): %v, want ErrInvalidArgument", in, err)
		}
	}
	if got, err := sandbox.ParsePIDs("100"); err != nil || got != 100 {
		t.Errorf("ParsePIDs(100) = %d, %v", got, err)
	}
	for _, in := range []string{"", "0", "-5", "1.5", "many"} {
		if _, err := sandbox.ParsePIDs(in); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("ParsePIDs(%q): %v, want ErrInvalidArgument", in, err)
		}
	}
}

// TestResourcesValidate: the one validator names the field.
func TestResourcesValidate(t *testing.T) {
	if err := (sandbox.Resources{}).Validate(); err != nil {
		t.Errorf("zero: %v", err)
	}
	if err := (sandbox.Resources{CPUCores: 0.5, MemoryMiB: 512, DiskMiB: 1024, PIDs: 10}).Validate(); err != nil {
		t.Errorf("valid: %v", err)
	}
	for _, c := range []struct {
		r     sandbox.Resources
		field string
	}{
		{sandbox.Resources{CPUCores: -1}, "CPUCores"},
		{sandbox.Resources{CPUCores: math.NaN()}, "CPUCores"},
		{sandbox.Resources{MemoryMiB: -1}, "MemoryMiB"},
		{sandbox.Resources{DiskMiB: -1}, "DiskMiB"},
		{sandbox.Resources{PIDs: -1}, "PIDs"},
	} {
		if err := c.r.Validate(); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "Resources."+c.field) {
			t.Errorf("%+v: %v, want ErrInvalidArgument naming Resources.%s", c.r, err, c.field)
		}
	}
	if gib, whole := sandbox.GiB(3072); gib != 3 || !whole {
		t.Errorf("GiB(3072) = %d, %v", gib, whole)
	}
	if _, whole := sandbox.GiB(1500); whole {
		t.Error("GiB(1500) is whole")
	}
}
