package cgroup

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestFreezeV2Writes: on v2 Freeze writes 1 to cgroup.freeze and returns
// once cgroup.events says frozen; Thaw writes 0 (a folder plays the
// cgroup: this host has no v2 controllers).
func TestFreezeV2Writes(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "cgroup.freeze"), "0")
	write(t, filepath.Join(dir, "cgroup.events"), "populated 1\nfrozen 1\n")
	s := &Set{Version: 2, Paths: map[string]string{"unified": dir}}
	if err := s.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "1" {
		t.Errorf("cgroup.freeze after Freeze = %q, want 1", got)
	}
	if !s.Frozen() {
		t.Error("Frozen() = false with events frozen 1")
	}
	write(t, filepath.Join(dir, "cgroup.events"), "populated 1\nfrozen 0\n")
	if err := s.Thaw(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze after Thaw = %q, want 0", got)
	}
}

// TestFreezeGivesUpThawed: a Freeze whose context ends before every task
// is frozen thaws the cgroup again and returns the context's error.
func TestFreezeGivesUpThawed(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "cgroup.freeze"), "0")
	write(t, filepath.Join(dir, "cgroup.events"), "populated 1\nfrozen 0\n")
	s := &Set{Version: 2, Paths: map[string]string{"unified": dir}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Freeze(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Freeze with an ended context = %v, want context.Canceled", err)
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze after a failed Freeze = %q, want 0 (thawed)", got)
	}
}

// TestFreezerParse: the v1 states and v2 events files are read as
// frozen or not; what is neither is an error.
func TestFreezerParse(t *testing.T) {
	for in, want := range map[string]bool{"FROZEN\n": true, "THAWED\n": false, "FREEZING\n": false} {
		if got, err := stateFrozen(in); err != nil || got != want {
			t.Errorf("stateFrozen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := stateFrozen("COLD"); err == nil {
		t.Error("stateFrozen(COLD): no error")
	}
	for in, want := range map[string]bool{"populated 1\nfrozen 1\n": true, "populated 0\nfrozen 0\n": false} {
		if got, err := eventsFrozen(in); err != nil || got != want {
			t.Errorf("eventsFrozen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := eventsFrozen("populated 1\n"); err == nil {
		t.Error("eventsFrozen without a frozen key: no error")
	}
}

// TestLegacySetHasNoFreezer: a v1 set recorded before sandboxes got a
// freezer still loads; Freeze fails with sandbox.ErrUnsupported and
// Thaw does nothing.
func TestLegacySetHasNoFreezer(t *testing.T) {
	var s Set
	rec := `{"version":1,"paths":{"memory":"/nonexistent/m","pids":"/nonexistent/p"},"commands":{"memory":"/nonexistent/m/cmds"}}`
	if err := json.Unmarshal([]byte(rec), &s); err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze(context.Background()); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("Freeze of a set without a freezer = %v, want sandbox.ErrUnsupported", err)
	}
	if err := s.Thaw(context.Background()); err != nil {
		t.Errorf("Thaw of a set without a freezer = %v", err)
	}
	if s.HasFreezer() || s.Frozen() {
		t.Error("a set without a freezer reports one")
	}
	var none *Set
	if err := none.Freeze(context.Background()); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("Freeze of no set = %v, want sandbox.ErrUnsupported", err)
	}
}

// TestFreezeStopsCPU: a busy process in a frozen set uses no CPU (its
// cgroup's usage counter does not move), runs again once thawed, and a
// Destroy of the frozen set kills it and removes every folder.
func TestFreezeStopsCPU(t *testing.T) {
	s, cmd := busySet(t)
	if err := s.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.Frozen() {
		t.Fatal("Frozen() = false after Freeze")
	}
	before := cpuUsage(t, s)
	time.Sleep(100 * time.Millisecond)
	if after := cpuUsage(t, s); after != before {
		t.Errorf("CPU usage of a frozen cgroup moved: %d → %d", before, after)
	}
	if err := s.Thaw(context.Background()); err != nil {
		t.Fatal(err)
	}
	for cpuUsage(t, s) == before {
		time.Sleep(5 * time.Millisecond) // the test's timeout bounds this
	}
	if err := s.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy(context.Background()); err != nil {
		t.Fatalf("Destroy of a frozen set: %v", err)
	}
	_ = cmd.Wait()
	for _, d := range s.Dirs() {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left after Destroy", d)
		}
	}
}

// busySet makes a set on this host with a freezer, holding a process
// that spins.
func busySet(t *testing.T) (*Set, *exec.Cmd) {
	testenv.NeedRoot(t, "cgroups need root")
	h := Probe()
	s, err := New(h, Key(t.TempDir(), "freeze"), Limits{})
	if err != nil || s == nil {
		testenv.Skipf(t, "no cgroups here: %v %s", err, h.Why)
	}
	t.Cleanup(func() { _ = s.Destroy(context.Background()) })
	testenv.Need(t, s.HasFreezer(), "this host's cgroups have no freezer")
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Thaw(context.Background()); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := s.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return s, cmd
}

// cpuUsage reads the CPU the set's tasks used (v1 cpuacct.usage in ns,
// v2 cpu.stat usage_usec).
func cpuUsage(t *testing.T, s *Set) int64 {
	t.Helper()
	if s.Version == 2 {
		for _, line := range strings.Split(read(t, filepath.Join(s.Paths["unified"], "cpu.stat")), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("cpu.stat has no usage_usec")
	}
	n, err := strconv.ParseInt(read(t, filepath.Join(s.Paths["cpuacct"], "cpuacct.usage")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func write(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
