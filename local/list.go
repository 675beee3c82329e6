package local

import (
	"context"
	"encoding/json"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// ListSummaries describes every sandbox in stateDir as [List] does (and
// removes the same expired ones), but with only what a listing shows:
// ID, Name, Provider, Status, CreatedAt, LastUsedAt and TimeoutAt. Its
// statuses are List's: a sandbox whose init died is stopped. It costs a
// fraction of List: each sandbox's metadata is read once and only those
// fields are decoded, and nothing else of the sandbox is read unless it
// may have expired or is paused (then List's way is taken for it).
func ListSummaries(ctx context.Context, stateDir string) ([]sandbox.Info, error) {
	buf := make([]byte, maxMetaSummary+1) // shared: one sandbox at a time
	return listWith(ctx, stateDir, func(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
		return summarize(ctx, stateDir, id, buf)
	})
}

// metaSummary is the part of meta (metaFile) a summary needs: what
// statusOf, lastUsed, idlePaused and expired read.
type metaSummary struct {
	ID         string         `json:"id"`
	CreatedAt  time.Time      `json:"createdAt"`
	Status     sandbox.Status `json:"status"`
	StoppedAt  time.Time      `json:"stoppedAt"`
	PausedAt   time.Time      `json:"pausedAt"`
	LastUsedAt time.Time      `json:"lastUsedAt"`
	Config     struct {
		Ephemeral          bool          `json:"ephemeral"`
		AutoStopInterval   time.Duration `json:"autoStopInterval"`
		AutoDeleteInterval time.Duration `json:"autoDeleteInterval"`
	} `json:"options"`
	Init *initRecord `json:"init"`
}

// maxMetaSummary bounds the metadata summarize reads: larger files (many
// ports, mounts or labels) take List's way.
const maxMetaSummary = 16 << 10

// summarize describes the sandbox id of stateDir for ListSummaries,
// reading its metadata into buf.
func summarize(ctx context.Context, stateDir, id string, buf []byte) (*sandbox.Info, error) {
	dir := sandboxDir(stateDir, id)
	var s metaSummary
	if !readMetaSummary(dir, buf, &s) {
		return lookupSummary(ctx, stateDir, id)
	}
	m := meta{ID: s.ID, CreatedAt: s.CreatedAt, Status: s.Status, StoppedAt: s.StoppedAt, PausedAt: s.PausedAt, LastUsedAt: s.LastUsedAt, Init: s.Init}
	m.Config.Ephemeral, m.Config.AutoStopInterval, m.Config.AutoDeleteInterval = s.Config.Ephemeral, s.Config.AutoStopInterval, s.Config.AutoDeleteInterval
	alive := m.alive()
	if m.Status == sandbox.StatusPaused || !alive && (m.Config.Ephemeral || m.Config.AutoDeleteInterval > 0) {
		// It may need stopping or removing first (openMeta).
		return lookupSummary(ctx, stateDir, id)
	}
	info := &sandbox.Info{ID: m.ID, Name: "LocalSandbox", Provider: "local", Status: sandbox.StatusStopped, CreatedAt: m.CreatedAt, LastUsedAt: lastUsed(dir, &m)}
	if alive {
		info.Status = sandbox.StatusRunning
		if m.Config.AutoStopInterval > 0 && !info.LastUsedAt.IsZero() {
			info.TimeoutAt = info.LastUsedAt.Add(m.Config.AutoStopInterval)
		}
	}
	return info, nil
}

// readMetaSummary decodes the summary of the metadata of the sandbox
// folder dir into s, reading it into buf (maxMetaSummary+1 bytes); false
// when it cannot (no metadata, too large, not JSON), for the caller to
// take List's way, which says why. It reads with plain system calls: a
// regular file gains nothing from the runtime's poller.
func readMetaSummary(dir string, buf []byte, s *metaSummary) bool {
	fd, err := unix.Open(filepath.Join(dir, metaFile), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n <= maxMetaSummary && json.Unmarshal(buf[:n], s) == nil
}

// lookupSummary is lookup, trimmed to a summary.
func lookupSummary(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
	in, err := lookup(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	return &sandbox.Info{ID: in.ID, Name: in.Name, Provider: in.Provider, Status: in.Status, CreatedAt: in.CreatedAt, LastUsedAt: in.LastUsedAt, TimeoutAt: in.TimeoutAt}, nil
}
