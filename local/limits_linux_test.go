package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local/internal/cgroup"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// fakeHost is a host as root with every limit available, 8 cores,
// 16 GiB of memory.
func fakeHost() hostLimits {
	return hostLimits{cores: 8, memoryMB: 16 << 10, cgroups: cgroupHost{Host: cgroup.Host{Version: 1}, have: limitCPU | limitMemory | limitPIDs}}
}

// TestPlanLimits: the defaults, explicit values, and what a host that
// enforces nothing reports.
func TestPlanLimits(t *testing.T) {
	dir := t.TempDir()
	free, err := freeDiskMB(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := planLimits(fakeHost(), Resources{}, dir, 0, true, -1)
	want := limits{CPU: 7, MemoryMB: 4 << 10, PIDs: DefaultPIDs, DiskMB: defaultDiskMB(free), Cgroup: 1}
	if l != want {
		t.Errorf("defaults %+v, want %+v", l, want)
	}
	for cores, want := range map[int]float64{1: 1, 2: 1, 3: 2, 64: 63} {
		h := fakeHost()
		h.cores = cores
		if l := planLimits(h, Resources{}, dir, 0, true, -1); l.CPU != want {
			t.Errorf("default CPU on %d cores: %g, want %g", cores, l.CPU, want)
		}
	}
	r := Resources{CPUCores: 0.5, MemoryMiB: 512, PIDs: 10, DiskMiB: 100}
	if l := planLimits(fakeHost(), r, dir, 0, true, -1); l != (limits{CPU: 0.5, MemoryMB: 512, PIDs: 10, DiskMB: 100, Cgroup: 1}) {
		t.Errorf("explicit %+v", l)
	}
	// An existing sandbox keeps the size of its image, or has none.
	if l := planLimits(fakeHost(), r, dir, 300, false, -1); l.DiskMB != 300 {
		t.Errorf("existing image: %+v", l)
	}
	if l := planLimits(fakeHost(), r, dir, 0, false, -1); l.DiskMB != 0 || !strings.Contains(l.note(), "no disk limit: the sandbox was created without a disk image") {
		t.Errorf("existing sandbox without image: %+v", l)
	}

	unprivileged := hostLimits{cores: 8, memoryMB: 16 << 10, cgroups: cgroupHost{why: "cgroups need root"}, disk: errors.New("disk limits need root")}
	l = planLimits(unprivileged, Resources{}, dir, 0, true, -1)
	if l.unenforced() != allLimits || l.note() != "no CPU, memory, process-count or disk limit: cgroups need root; disk limits need root" {
		t.Errorf("unprivileged: %+v, note %q", l, l.note())
	}
	if got := l.instructions(); got != "No CPU, memory, process-count or disk limit is enforced." {
		t.Errorf("unprivileged instructions %q", got)
	}
	for _, r := range []Resources{{CPUCores: 1}, {MemoryMiB: 100}, {PIDs: 10}, {DiskMiB: 100}} {
		err := checkResourcesOn(unprivileged, r, dir)
		if !errors.Is(err, ErrLimitUnavailable) || !errors.Is(err, sandbox.ErrIsolationUnavailable) || !strings.Contains(err.Error(), "need root") {
			t.Errorf("%+v unprivileged: %v", r, err)
		}
	}
}

func TestDefaultDiskMB(t *testing.T) {
	for free, want := range map[int64]int64{0: 64, 300: 64, 1000: 128, 20000: 4096, 1 << 20: 4096} {
		if got := defaultDiskMB(free); got != want {
			t.Errorf("defaultDiskMB(%d) = %d, want %d", free, got, want)
		}
	}
}

// TestResourcesBounds: values out of range are errors that say what is
// wrong, before anything is created.
func TestResourcesBounds(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		r    Resources
		want string
	}{
		{Resources{CPUCores: -1}, "negative"},
		{Resources{PIDs: -1}, "negative"},
		{Resources{MemoryMiB: -5}, "negative"},
		{Resources{DiskMiB: -5}, "negative"},
		{Resources{CPUCores: 0.001}, "below 0.01 cores"},
		{Resources{MemoryMiB: 63}, "below 64 MiB"},
		{Resources{DiskMiB: 10}, "below 64 MiB"},
	} {
		if _, err := normalizeResources(tt.r); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v; want %q", tt.r, err, tt.want)
		}
	}
	h := fakeHost()
	h.disk = nil
	for _, tt := range []struct {
		r    Resources
		want string
	}{
		{Resources{CPUCores: 9}, "more than the host's 8 cores"},
		{Resources{MemoryMiB: 17 << 10}, "more than the 16384 MiB"},
		{Resources{DiskMiB: 1 << 40}, "free in the state dir's file system"},
	} {
		if err := checkResourcesOn(h, tt.r, dir); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v; want %q", tt.r, err, tt.want)
		}
	}
	if err := checkResourcesOn(h, Resources{CPUCores: 8, MemoryMiB: 16 << 10, PIDs: 1, DiskMiB: 64}, dir); err != nil {
		t.Errorf("values at the bounds: %v", err)
	}
}

// BenchmarkDiskImage measures what a disk limit adds to a sandbox's
// creation (copying the template, attaching a loop device, mounting) and
// its removal (waiting for the loop device to clear), against os/exec of
// `true` in the same run.
func BenchmarkDiskImage(b *testing.B) {
	testenv.Need(b, probeDisk() == nil, "disk images need root, loop devices and mkfs.ext4")
	stateDir := b.TempDir()
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := diskTemplate(stateDir, 16<<10); err != nil { // formatted once
		b.Fatal(err)
	}
	var create, release, base time.Duration
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(stateDir, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := createImage(dir, stateDir, 16<<10); err != nil {
			b.Fatal(err)
		}
		disk, err := mountDisk(dir)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		disk.Close()
		if err := waitDiskReleased(context.Background(), dir); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
		create, release, base = create+t1.Sub(t0), release+t2.Sub(t1), base+time.Since(t2)
		os.RemoveAll(dir)
	}
	b.ReportMetric(float64(create.Microseconds())/1000/float64(b.N), "ms/create")
	b.ReportMetric(float64(release.Microseconds())/1000/float64(b.N), "ms/release")
	b.ReportMetric(float64(base.Microseconds())/1000/float64(b.N), "ms/os-exec")
	b.ReportMetric(float64(create)/float64(base), "x-os-exec")
}

// TestSweepCgroups: creating a sandbox removes the cgroups of this state
// dir's sandboxes whose folder is gone (left by a process that died while
// it made or removed one), and leaves those of sandboxes that exist and
// of other state dirs.
func TestSweepCgroups(t *testing.T) {
	h := probeCgroups()
	testenv.Need(t, h.Version != 0, "needs root and cgroups")
	stateDir := t.TempDir()
	if err := os.Chmod(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	parents := h.Parents()
	orphan := cgroup.Key(stateDir, "ghost")
	foreign := cgroup.Key(stateDir+"-other", "ghost")
	for _, p := range parents {
		for _, d := range []string{filepath.Join(p, orphan, cgroup.CommandsDir), filepath.Join(p, foreign)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, p := range parents {
			_ = os.Remove(filepath.Join(p, orphan, cgroup.CommandsDir))
			_ = os.Remove(filepath.Join(p, orphan))
			_ = os.Remove(filepath.Join(p, foreign))
		}
	})
	sb, err := New(Options{ID: "sweeper", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	for _, p := range parents {
		if _, err := os.Stat(filepath.Join(p, orphan)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the orphan cgroup %s is still there: %v", filepath.Join(p, orphan), err)
		}
		if _, err := os.Stat(filepath.Join(p, foreign)); err != nil {
			t.Errorf("another state dir's cgroup %s was removed: %v", filepath.Join(p, foreign), err)
		}
		if _, err := os.Stat(filepath.Join(p, cgroup.Key(stateDir, "sweeper"))); err != nil {
			t.Errorf("the new sandbox's cgroup %s: %v", filepath.Join(p, cgroup.Key(stateDir, "sweeper")), err)
		}
	}
}
