package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestLimitWritesV1: what the limits become on cgroup v1, and where.
func TestLimitWritesV1(t *testing.T) {
	l := &limits{CPU: 0.5, MemoryMB: 128, PIDs: 100}
	want := []cgroupWrite{
		{"memory", false, "memory.limit_in_bytes", "201326592"},
		{"memory", false, "memory.memsw.limit_in_bytes", "201326592"},
		{"memory", true, "memory.limit_in_bytes", "134217728"},
		{"memory", true, "memory.memsw.limit_in_bytes", "134217728"},
		{"pids", false, "pids.max", "264"},
		{"pids", true, "pids.max", "100"},
		{"cpu", false, "cpu.cfs_period_us", "100000"},
		{"cpu", false, "cpu.cfs_quota_us", "50000"},
		{"cpu", false, "cpu.shares", "512"},
	}
	if got := limitWritesV1(l, true); !reflect.DeepEqual(got, want) {
		t.Errorf("with swap accounting:\n got %v\nwant %v", got, want)
	}
	noSwap := slicesDelete(want, func(w cgroupWrite) bool { return strings.Contains(w.file, "memsw") })
	if got := limitWritesV1(l, false); !reflect.DeepEqual(got, noSwap) {
		t.Errorf("without swap accounting:\n got %v\nwant %v", got, noSwap)
	}
	if got := limitWritesV1(&limits{}, true); len(got) != 0 {
		t.Errorf("no limits: %v", got)
	}
}

func slicesDelete(ws []cgroupWrite, del func(cgroupWrite) bool) []cgroupWrite {
	var out []cgroupWrite
	for _, w := range ws {
		if !del(w) {
			out = append(out, w)
		}
	}
	return out
}

// TestCgroupSetV2: what a sandbox's cgroups are on cgroup v2, written into
// a folder that plays the hierarchy (this host's v2 hierarchy has no
// controller to try it on).
func TestCgroupSetV2(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset cpu io memory hugetlb pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := &limits{CPU: 1.5, MemoryMB: 256, PIDs: 1024}
	set, err := newCgroupSetV2(cgroupMount{dir: root, v2: true}, "k", l)
	if err != nil {
		t.Fatal(err)
	}
	sb := filepath.Join(root, cgroupParent, "k")
	want := map[string]string{
		"cgroup.subtree_control":                        "+cpu +memory +pids",
		"agentbox/cgroup.subtree_control":               "+cpu +memory +pids",
		"agentbox/k/memory.max":                         "335544320",
		"agentbox/k/memory.swap.max":                    "0",
		"agentbox/k/pids.max":                           "2112",
		"agentbox/k/cgroup.subtree_control":             "+pids",
		"agentbox/k/cpu.max":                            "150000 100000",
		"agentbox/k/cpu.weight":                         "150",
		"agentbox/k/" + cmdsCgroup + "/cgroup.type":     "threaded",
		"agentbox/k/" + cmdsCgroup + "/pids.max":        "1024",
		"agentbox/k/" + cmdsCgroup + "/memory.max":      "",
		"agentbox/k/" + cmdsCgroup + "/cgroup.subtree_": "",
	}
	for f, v := range want {
		b, err := os.ReadFile(filepath.Join(root, f))
		if v == "" {
			if err == nil {
				t.Errorf("%s written: %q", f, b)
			}
			continue
		}
		if err != nil || string(b) != v {
			t.Errorf("%s: %q, %v; want %q", f, b, err, v)
		}
	}
	wantSet := &cgroupSet{Version: 2, Paths: map[string]string{"unified": sb}, Commands: map[string]string{"unified": filepath.Join(sb, cmdsCgroup)}}
	if !reflect.DeepEqual(set, wantSet) {
		t.Errorf("set %+v, want %+v", set, wantSet)
	}
	// The init's thread joins the commands through cgroup.threads.
	if err := os.WriteFile(filepath.Join(sb, cmdsCgroup, "cgroup.threads"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := set.openCommandCgroups()
	if err != nil || len(files) != 1 || files[0].Name() != filepath.Join(sb, cmdsCgroup, "cgroup.threads") {
		t.Errorf("command cgroup files %v, %v", files, err)
	}
	closeFiles(files)
	if d := set.dirs(); len(d) != 2 || d[0] != filepath.Join(sb, cmdsCgroup) || d[1] != sb {
		t.Errorf("dirs %v: the commands' must come first", d)
	}
	r := resourcesV2(sb)
	if r.CPUCores != 1.5 || r.MemoryMB != 256 {
		t.Errorf("resources %+v", r)
	}
}

// fakeHost is a host as root with every limit available, 8 cores,
// 16 GiB of memory.
func fakeHost() hostLimits {
	return hostLimits{cores: 8, memoryMB: 16 << 10, cgroups: cgroupHost{version: 1, have: limitCPU | limitMemory | limitPIDs}}
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
	r := Resources{CPU: 0.5, MemoryMB: 512, PIDs: 10, DiskMB: 100}
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
	for _, r := range []Resources{{CPU: 1}, {MemoryMB: 100}, {PIDs: 10}, {DiskMB: 100}} {
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
		{Resources{CPU: -1}, "negative"},
		{Resources{PIDs: -1}, "negative"},
		{Resources{MemoryMB: -5}, "negative"},
		{Resources{DiskMB: -5}, "negative"},
		{Resources{CPU: 0.001}, "below 0.01 cores"},
		{Resources{MemoryMB: 63}, "below 64 MiB"},
		{Resources{DiskMB: 10}, "below 64 MiB"},
	} {
		if _, err := tt.r.normalize(); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v; want %q", tt.r, err, tt.want)
		}
	}
	h := fakeHost()
	h.disk = nil
	for _, tt := range []struct {
		r    Resources
		want string
	}{
		{Resources{CPU: 9}, "more than the host's 8 cores"},
		{Resources{MemoryMB: 17 << 10}, "more than the 16384 MiB"},
		{Resources{DiskMB: 1 << 40}, "free in the state dir's file system"},
	} {
		if err := checkResourcesOn(h, tt.r, dir); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v; want %q", tt.r, err, tt.want)
		}
	}
	if err := checkResourcesOn(h, Resources{CPU: 8, MemoryMB: 16 << 10, PIDs: 1, DiskMB: 64}, dir); err != nil {
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
	testenv.Need(t, h.version != 0, "needs root and cgroups")
	stateDir := t.TempDir()
	if err := os.Chmod(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	parents := h.cgroupParents()
	orphan := cgroupKey(stateDir, "ghost")
	foreign := cgroupKey(stateDir+"-other", "ghost")
	for _, p := range parents {
		for _, d := range []string{filepath.Join(p, orphan, cmdsCgroup), filepath.Join(p, foreign)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, p := range parents {
			_ = os.Remove(filepath.Join(p, orphan, cmdsCgroup))
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
		if _, err := os.Stat(filepath.Join(p, cgroupKey(stateDir, "sweeper"))); err != nil {
			t.Errorf("the new sandbox's cgroup %s: %v", filepath.Join(p, cgroupKey(stateDir, "sweeper")), err)
		}
	}
}
