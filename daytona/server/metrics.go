package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// Metrics history (issue 30): serve samples GET /system/metrics of every
// started sandbox each interval (10 s; Knobs.MetricsInterval in tests) and
// keeps the last hour of samples in memory, per sandbox, for the
// dashboard's charts:
//
//	GET /api/sandbox/{id}/metrics/history?minutes=N   metricsHistory (1 ≤ N ≤ 60, default 60)
//
// The samples are a passive read (local.PassiveRequestHeader): they do not
// count as a use of the sandbox, so they never keep one from its auto-stop
// or auto-pause. A stopped sandbox is not sampled (its samples stay until
// they are an hour old); a deleted one's are dropped at the next tick.

// Bounds of the metrics history.
const (
	// defaultMetricsInterval is how often serve samples each started
	// sandbox without Knobs.MetricsInterval.
	defaultMetricsInterval = 10 * time.Second
	// metricsHistoryLen is how many samples a sandbox keeps: an hour
	// at the default interval.
	metricsHistoryLen = 360
	// metricsHistoryMax is how old a sample may be before it is dropped.
	metricsHistoryMax = time.Hour
	// metricsParallel is how many sandboxes are sampled at once.
	metricsParallel = 8
	// maxMetricsBody bounds the answer read from a sandbox's toolbox.
	maxMetricsBody = 64 << 10
)

// metricsEngine is the part of an engine that reports on a sandbox
// without using it.
type metricsEngine interface {
	// metrics samples the CPU, memory and disk of the running sandbox id
	// (its toolbox's GET /system/metrics) without counting as a use of
	// it.
	metrics(ctx context.Context, id string) (*toolbox.SystemMetrics, error)
	// networkInfo returns the network access of sandbox id as the
	// engine sees it: mode, refusal counters and policy log
	// (network.go).
	networkInfo(ctx context.Context, id string) (*sandbox.NetworkInfo, error)
}

// metricsRing is the samples of one sandbox, oldest first once unrolled.
type metricsRing struct {
	samples []metricsSample // at most metricsHistoryLen
	next    int             // where the next sample goes once full
	failing bool            // the last sample failed (logged once)
}

// add adds m, overwriting the oldest sample when full.
func (r *metricsRing) add(m metricsSample) {
	if len(r.samples) < metricsHistoryLen {
		r.samples = append(r.samples, m)
		return
	}
	r.samples[r.next] = m
	r.next = (r.next + 1) % metricsHistoryLen
}

// since returns the samples taken at or after t, oldest first.
func (r *metricsRing) since(t time.Time) []metricsSample {
	out := make([]metricsSample, 0, len(r.samples))
	for i := range r.samples {
		m := r.samples[(r.next+i)%len(r.samples)]
		if !m.Time.Before(t) {
			out = append(out, m)
		}
	}
	return out
}

// latest returns the time of the newest sample (zero without one).
func (r *metricsRing) latest() time.Time {
	if len(r.samples) == 0 {
		return time.Time{}
	}
	return r.samples[(r.next+len(r.samples)-1)%len(r.samples)].Time
}

// metricsSet is the metrics history of every sandbox, by id.
type metricsSet struct {
	mu   sync.Mutex
	byID map[string]*metricsRing
}

// add records m as a sample of sandbox id; failed says whether sampling
// failed instead, and add reports whether that is new (to log it once).
func (ms *metricsSet) add(id string, m metricsSample, failed bool) (newFailure bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.byID == nil {
		ms.byID = map[string]*metricsRing{}
	}
	r := ms.byID[id]
	if r == nil {
		r = &metricsRing{}
		ms.byID[id] = r
	}
	if failed {
		newFailure = !r.failing
		r.failing = true
		return newFailure
	}
	r.failing = false
	r.add(m)
	return false
}

// since returns sandbox id's samples taken at or after t.
func (ms *metricsSet) since(id string, t time.Time) []metricsSample {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if r := ms.byID[id]; r != nil {
		return r.since(t)
	}
	return []metricsSample{}
}

// prune drops the history of the sandboxes keep does not hold and of
// those whose newest sample is older than old (a sandbox whose sampling
// has only failed so far keeps its failure, so that it is logged once).
func (ms *metricsSet) prune(keep func(id string) bool, old time.Time) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for id, r := range ms.byID {
		if !keep(id) || len(r.samples) > 0 && r.latest().Before(old) {
			delete(ms.byID, id)
		}
	}
}

// len returns how many sandboxes have a history.
func (ms *metricsSet) len() int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return len(ms.byID)
}

// metricsInterval is how often the server samples its sandboxes.
func (s *Server) metricsInterval() time.Duration {
	if s.knobs != nil && s.knobs.MetricsInterval > 0 {
		return s.knobs.MetricsInterval
	}
	return defaultMetricsInterval
}

// sampleLoop samples the started sandboxes every metricsInterval until
// the server's timers end (Close).
func (s *Server) sampleLoop() {
	t := time.NewTicker(s.metricsInterval())
	defer t.Stop()
	for {
		select {
		case <-s.timers.Done():
			return
		case <-t.C:
		}
		s.sampleAll(s.timers)
	}
}

// sampleAll takes one sample of every started sandbox, at most
// metricsParallel at once, and drops the history of deleted sandboxes
// and of samples older than an hour. It returns once every sample is in.
func (s *Server) sampleAll(ctx context.Context) {
	var ids []string
	s.mu.Lock()
	for id, rec := range s.byID {
		if rec.state == stateStarted && !rec.busy {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	s.metrics.prune(func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.byID[id] != nil
	}, s.now().Add(-metricsHistoryMax))
	timeout := min(max(s.metricsInterval(), 2*time.Second), 10*time.Second)
	sem := make(chan struct{}, metricsParallel)
	var wg sync.WaitGroup
	for _, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			sctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			s.sampleOne(sctx, id)
		})
	}
	wg.Wait()
}

// sampleOne samples sandbox id and records the sample, unless the
// sandbox stopped or went meanwhile.
func (s *Server) sampleOne(ctx context.Context, id string) {
	m, err := s.eng.metrics(ctx, id)
	now := s.now()
	s.mu.Lock()
	rec := s.byID[id]
	started := rec != nil && rec.state == stateStarted
	s.mu.Unlock()
	if !started || s.timers.Err() != nil {
		return // stopped, deleted or closing meanwhile: no sample
	}
	if err != nil {
		if s.metrics.add(id, metricsSample{}, true) {
			s.logf("agentbox serve: sampling the metrics of sandbox %s (logged once until it works again): %v", id, err)
		}
		return
	}
	s.metrics.add(id, sampleOf(m, now), false)
}

// sampleOf converts the toolbox's answer, which the sandbox could have
// shaped, to a sample with sane values: finite, non-negative.
func sampleOf(m *toolbox.SystemMetrics, at time.Time) metricsSample {
	pct := m.CPUUsedPct
	if math.IsNaN(pct) || math.IsInf(pct, 0) || pct < 0 {
		pct = 0
	}
	nonNeg := func(n int64) int64 { return max(n, 0) }
	return metricsSample{
		Time: at.UTC(), CPUUsedPct: min(pct, 100*float64(max(m.CPUCount, 1))),
		MemUsed: nonNeg(m.MemUsed), MemTotal: nonNeg(m.MemTotal),
		DiskUsed: nonNeg(m.DiskUsed), DiskTotal: nonNeg(m.DiskTotal),
	}
}

// getMetricsHistory answers GET /api/sandbox/{id}/metrics/history.
func (s *Server) getMetricsHistory(w http.ResponseWriter, r *http.Request) error {
	minutes := 60
	if vs := r.URL.Query()["minutes"]; len(vs) > 0 {
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 || n > 60 || len(vs) > 1 {
			return errorf(http.StatusBadRequest, "minutes=%q: want one whole number of minutes from 1 to 60 (the history keeps the last hour)", strings.Join(vs, "&"))
		}
		minutes = n
	}
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	var id string
	if err == nil {
		id = rec.id
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	from := s.now().Add(-time.Duration(minutes) * time.Minute)
	writeJSON(w, metricsHistory{IntervalSeconds: s.metricsInterval().Seconds(), Samples: s.metrics.since(id, from)})
	return nil
}

// metricsRoutes adds the dashboard's metrics-history and network routes
// with api, which checks the key and the organization.
func (s *Server) metricsRoutes(api func(pattern string, h handlerFunc)) {
	api("GET /api/sandbox/{id}/metrics/history", s.getMetricsHistory)
	api("GET /api/sandbox/{id}/network", s.getNetworkView)
}

// readSystemMetrics sends a passive GET /system/metrics over conn, a
// connection to a sandbox's toolbox, and reads its bounded answer. It
// closes conn.
func readSystemMetrics(ctx context.Context, conn net.Conn) (*toolbox.SystemMetrics, error) {
	used := false
	tr := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if used {
				return nil, errors.New("the sandbox's toolbox connection was used already")
			}
			used = true
			return conn, nil
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox/system/metrics", nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set(local.PassiveRequestHeader, "1")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("GET /system/metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET /system/metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /system/metrics: the toolbox answered %s", resp.Status)
	}
	if len(body) > maxMetricsBody {
		return nil, fmt.Errorf("GET /system/metrics: an answer over %d bytes", maxMetricsBody)
	}
	var m toolbox.SystemMetrics
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("GET /system/metrics: %w", err)
	}
	return &m, nil
}

// metrics samples the local sandbox id over its toolbox socket.
func (e localEngine) metrics(ctx context.Context, id string) (*toolbox.SystemMetrics, error) {
	conn, err := e.dial(ctx, id)
	if err != nil {
		return nil, err
	}
	return readSystemMetrics(ctx, conn)
}
