//go:build linux

package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
)

// osExecTrue returns the mean time of n runs of `true` through os/exec.
func osExecTrue(b *testing.B, n int) time.Duration {
	b.Helper()
	path, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkCreateToFirstCommand measures New + the first ExecuteCommand
// ("true") of a fresh sandbox, against os/exec of `true` in the same run.
func BenchmarkCreateToFirstCommand(b *testing.B) { benchCreate(b, local.Config{}) }

// BenchmarkCreateToFirstCommandReadOnlyRoot is BenchmarkCreateToFirstCommand
// with the host's system folders read-only (ReadOnlyRoot): no overlay, no
// base layer to check.
func BenchmarkCreateToFirstCommandReadOnlyRoot(b *testing.B) {
	benchCreate(b, local.Config{ReadOnlyRoot: true})
}

// BenchmarkCreateToFirstCommandVolume is BenchmarkCreateToFirstCommand
// with a volume, which a sandbox started by root sees through an
// ID-mapped mount.
func BenchmarkCreateToFirstCommandVolume(b *testing.B) {
	benchCreate(b, local.Config{Volumes: []local.Volume{{Name: "v", MountPath: "/v"}}})
}

// BenchmarkCreateToFirstCommandImage is BenchmarkCreateToFirstCommand
// with a root made of an image of the store (a small rootfs, its layer
// unpacked already): an overlay of its ID-mapped layer with a writable
// upper.
func BenchmarkCreateToFirstCommandImage(b *testing.B) {
	benchCreateIn(b, imageStateDir(b), local.Config{Image: benchImage})
}

// BenchmarkCreateToFirstCommandSnapshot is BenchmarkCreateToFirstCommand
// with a root made of a snapshot: the image's layer and the snapshot's.
func BenchmarkCreateToFirstCommandSnapshot(b *testing.B) {
	benchCreateIn(b, snapshotStateDir(b), local.Config{Snapshot: benchSnapshot})
}

// The image and snapshot of the benchmarks' state dirs.
const (
	benchImage    = "bench/image:1"
	benchSnapshot = "bench-snapshot"
)

// imageStateDir returns a new state dir whose image store holds the test
// image (testRootfs) as benchImage.
func imageStateDir(b *testing.B) string {
	b.Helper()
	testenv.NeedRoot(b, "needs root: a root made of an image is an overlay the host mounts")
	stateDir := newStateDir(b)
	if _, err := local.SaveImage(context.Background(), stateDir, &image.Image{Names: []string{benchImage}, Layers: []string{testRootfs(b)}}); err != nil {
		b.Fatal(err)
	}
	return stateDir
}

// snapshotStateDir returns imageStateDir with benchSnapshot: a sandbox
// of benchImage that wrote a file into its /usr, frozen.
func snapshotStateDir(b *testing.B) string {
	b.Helper()
	ctx := context.Background()
	stateDir := imageStateDir(b)
	sb := newSandbox(b, local.Options{ID: "snapshot-source", StateDir: stateDir, Config: local.Config{Image: benchImage}})
	mustRun(b, sb, "mkdir -p /usr/share/bench && echo frozen > /usr/share/bench/file")
	if _, err := sb.CreateSnapshot(ctx, benchSnapshot); err != nil {
		b.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		b.Fatal(err)
	}
	return stateDir
}

// BenchmarkCreateToFirstCommandPool is BenchmarkCreateToFirstCommand
// through a Pool: each sandbox takes a spare init, and the pool starts its
// replacement meanwhile (the benchmark waits for it, untimed, before the
// next sandbox and before timing os/exec).
func BenchmarkCreateToFirstCommandPool(b *testing.B) {
	benchPooled(b, newStateDir(b), local.Config{})
}

// BenchmarkCreateToFirstCommandImagePool is
// BenchmarkCreateToFirstCommandImage through a Pool.
func BenchmarkCreateToFirstCommandImagePool(b *testing.B) {
	benchPooled(b, imageStateDir(b), local.Config{Image: benchImage})
}

// BenchmarkCreateToFirstCommandSnapshotPool is
// BenchmarkCreateToFirstCommandSnapshot through a Pool.
func BenchmarkCreateToFirstCommandSnapshotPool(b *testing.B) {
	benchPooled(b, snapshotStateDir(b), local.Config{Snapshot: benchSnapshot})
}

// benchPooled is benchCreateIn with a Pool of the state dir.
func benchPooled(b *testing.B, stateDir string, c local.Config) {
	testenv.NeedRoot(b, "needs root: a Pool's spare inits get uid ranges and network namespaces of their own")
	pool, err := local.NewPool(local.PoolOptions{StateDir: stateDir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := pool.Close(); err != nil {
			b.Error(err)
		}
	})
	benchCreateWith(b, local.Options{StateDir: stateDir, Pool: pool, Config: c})
}

// benchCreate measures New + the first command of sandboxes shaped by c.
func benchCreate(b *testing.B, c local.Config) { benchCreateIn(b, newStateDir(b), c) }

// benchCreateIn is benchCreate in the state dir stateDir.
func benchCreateIn(b *testing.B, stateDir string, c local.Config) {
	benchCreateWith(b, local.Options{StateDir: stateDir, Config: c})
}

// benchCreateWith is benchCreate with the options opts (but the ID).
func benchCreateWith(b *testing.B, opts local.Options) {
	ctx := context.Background()
	path, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	fill := func() {
		if opts.Pool != nil {
			if err := opts.Pool.Fill(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The first sandbox of a state dir makes what every later one shares
	// (the base layer of the host's /usr, the disk image template): not a
	// cost of each create.
	opts.ID = "bench-warm-up"
	warm, err := local.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := warm.ExecuteCommand(ctx, "true", nil, nil); err != nil {
		b.Fatal(err)
	}
	if err := warm.Destroy(ctx); err != nil {
		b.Fatal(err)
	}
	fill()
	osExecTrue(b, 5)
	// Interleave so that noise hits both alike.
	var total, base time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		opts.ID = "bench-" + strconv.Itoa(i)
		sb, err := local.New(opts)
		if err != nil {
			b.Fatal(err)
		}
		r, err := sb.ExecuteCommand(ctx, "true", nil, nil)
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := sb.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
		fill()
		t0 := time.Now()
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
		base += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/create")
	b.ReportMetric(float64(base.Microseconds())/1000/float64(b.N), "ms/os-exec")
	b.ReportMetric(float64(total)/float64(base), "x-os-exec")
}

// BenchmarkExecuteTrue measures ExecuteCommand("true") in a running
// sandbox against os/exec of `true` in the same run.
func BenchmarkExecuteTrue(b *testing.B) {
	ctx := context.Background()
	sb := openSandbox(b, local.Options{})
	for i := 0; i < 5; i++ { // warm up: start, pooled session, connections
		if _, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	osExecTrue(b, 5)
	b.ResetTimer()
	// Interleave so that noise hits both alike.
	var inBox, plain time.Duration
	path, _ := exec.LookPath("true")
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := sb.ExecuteCommand(ctx, "true", nil, nil)
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r)
		}
		t1 := time.Now()
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
		inBox += t1.Sub(t0)
		plain += time.Since(t1)
	}
	b.ReportMetric(float64(inBox.Microseconds())/1000/float64(b.N), "ms/execute")
	b.ReportMetric(float64(plain.Microseconds())/1000/float64(b.N), "ms/os-exec")
	b.ReportMetric(float64(inBox)/float64(plain), "x-os-exec")
}

// BenchmarkIdleMemory starts 100 sandboxes, runs one command in each, and
// reports the memory an idle sandbox holds: the proportional set size
// (PSS, shared pages split among sharers) of every process in its pid
// namespace (the init and the toolbox's shells of its pooled session),
// summed from /proc and divided by 100, as MB-PSS/sandbox; the same for
// the inits alone as MB-PSS/init, and the resident set size (RSS) of all.
// It runs once whatever b.N.
func BenchmarkIdleMemory(b *testing.B) { benchIdleMemory(b, newStateDir(b), local.Config{}) }

// BenchmarkIdleMemoryImage is BenchmarkIdleMemory with sandboxes made of
// an image.
func BenchmarkIdleMemoryImage(b *testing.B) {
	benchIdleMemory(b, imageStateDir(b), local.Config{Image: benchImage})
}

// benchIdleMemory measures the memory of 100 idle sandboxes of stateDir
// shaped by cfg.
func benchIdleMemory(b *testing.B, stateDir string, cfg local.Config) {
	const n = 100
	boxes := idleSandboxes(b, stateDir, n, cfg)
	var pss, rss, initPSS, procs int64 // KiB, KiB, KiB, count
	for _, sb := range boxes {
		pid := local.InitPID(sb)
		p, _ := smapsRollup(pid)
		initPSS += p
		members := procsInNS(pidNS(pid))
		procs += int64(len(members))
		for m := range members {
			p, r := smapsRollup(m)
			pss += p
			rss += r
		}
	}
	b.ReportMetric(float64(pss)/n/1024, "MB-PSS/sandbox")
	b.ReportMetric(float64(initPSS)/n/1024, "MB-PSS/init")
	b.ReportMetric(float64(rss)/n/1024, "MB-RSS/sandbox")
	b.ReportMetric(float64(procs)/n, "procs/sandbox")
}

// idleSandboxes starts n sandboxes shaped by cfg, runs one command in
// each, and returns them a second later, idle; they are destroyed when
// the benchmark ends.
func idleSandboxes(b *testing.B, stateDir string, n int, cfg local.Config) []*local.Sandbox {
	ctx := context.Background()
	var boxes []*local.Sandbox
	b.Cleanup(func() {
		for _, sb := range boxes {
			if err := sb.Destroy(ctx); err != nil {
				b.Error(err)
			}
		}
	})
	for i := 0; i < n; i++ {
		sb, err := local.New(local.Options{ID: fmt.Sprintf("mem-%03d", i), StateDir: stateDir, Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		boxes = append(boxes, sb)
		if r, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil || r.ExitCode != 0 {
			b.Fatal(err, r)
		}
	}
	time.Sleep(time.Second) // let them go idle
	return boxes
}

// smapsRollup returns the Pss and Rss of pid in KiB.
func smapsRollup(pid int) (pss, rss int64) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Pss:":
			pss = v
		case "Rss:":
			rss = v
		}
	}
	return pss, rss
}
