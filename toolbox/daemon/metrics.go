package daemon

import (
	"context"
	"math"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// minCPUWindow is the shortest window CPU use is averaged over: the first
// GET /system/metrics samples twice this far apart, later ones average
// over the time since the previous sample when it is at least this old.
const minCPUWindow = 100 * time.Millisecond

// cpuSampler keeps the previous CPU sample of GET /system/metrics.
type cpuSampler struct {
	mu    sync.Mutex
	at    time.Time     // zero: no sample yet
	usage time.Duration // CPU time used by then
	pct   float64       // the latest average
}

// handleMetrics is GET /system/metrics: CPU and memory use and limits of
// the cgroups the server runs in (Options.Cgroups, or its own, cgroup v2
// or v1), and the disk of the work dir.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	cg := readCgroups(s.cgroupDirs())
	var m toolbox.SystemMetrics
	cores := cg.cpuLimit
	if cores <= 0 {
		cores = float64(runtime.NumCPU())
	}
	m.CPUCount = int(math.Ceil(cores))
	pct, err := s.cpu.average(r.Context(), cg, cores)
	if err != nil {
		return err
	}
	m.CPUUsedPct = pct
	m.MemTotal, m.MemUsed, m.MemCache = cg.memory()
	// The work dir is the sandbox's to replace with a link: resolved
	// inside the root like any path, stat'ed by descriptor.
	if st, err := s.root.statfs(s.workDir); err == nil {
		bs := int64(st.Bsize)
		m.DiskTotal = int64(st.Blocks) * bs
		m.DiskFree = int64(st.Bavail) * bs
		m.DiskUsed = (int64(st.Blocks) - int64(st.Bfree)) * bs
	}
	now := time.Now().UTC()
	m.Timestamp, m.TimestampUnix = now.Format(time.RFC3339), now.Unix()
	writeJSON(w, http.StatusOK, m)
	return nil
}

// cgroupDirs returns the cgroup folders metrics are read from.
func (s *Server) cgroupDirs() []string {
	if s.cgroups != nil {
		return s.cgroups
	}
	return ownCgroups("/proc/self/cgroup", "/proc/self/mountinfo")
}

// average returns the CPU use, in percent of cores, over the window that
// ends now (see minCPUWindow); cg is the current sample.
func (c *cpuSampler) average(ctx context.Context, cg cgroupUsage, cores float64) (float64, error) {
	now, usage := time.Now(), cg.cpuTime
	c.mu.Lock()
	at, prev, pct := c.at, c.usage, c.pct
	c.mu.Unlock()
	switch {
	case at.IsZero():
		// No window yet: make a short one.
		t := time.NewTimer(minCPUWindow)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		at, prev = now, usage
		now, usage = time.Now(), cg.refreshCPU()
	case now.Sub(at) < minCPUWindow:
		return pct, nil
	}
	pct = 100 * float64(usage-prev) / float64(now.Sub(at)) / cores
	pct = min(max(pct, 0), 100)
	c.mu.Lock()
	if now.After(c.at) {
		c.at, c.usage, c.pct = now, usage, pct
	}
	c.mu.Unlock()
	return pct, nil
}
