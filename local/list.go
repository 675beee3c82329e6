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
	stateDir, err := useStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	// The files of each sandbox are named relative to the sandboxes
	// folder: the kernel walks its path once, not twice per sandbox.
	sfd, err := unix.Open(filepath.Join(stateDir, sandboxesDir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return listWith(ctx, stateDir, lookupSummary) // none (listWith says so), or List's way
	}
	defer unix.Close(sfd)
	buf := make([]byte, maxMetaSummary+1) // shared: one sandbox at a time
	return listWith(ctx, stateDir, func(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
		return summarize(ctx, stateDir, id, sfd, buf)
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

// summarize describes the sandbox id of stateDir for ListSummaries: its
// files are found relative to sfd, the sandboxes folder, and its metadata
// is read into buf.
func summarize(ctx context.Context, stateDir, id string, sfd int, buf []byte) (*sandbox.Info, error) {
	var s metaSummary
	if !readMetaSummary(sfd, id, buf, &s) {
		return lookupSummary(ctx, stateDir, id)
	}
	m := meta{ID: s.ID, CreatedAt: s.CreatedAt, Status: s.Status, StoppedAt: s.StoppedAt, PausedAt: s.PausedAt, LastUsedAt: s.LastUsedAt, Init: s.Init}
	m.Config.Ephemeral, m.Config.AutoStopInterval, m.Config.AutoDeleteInterval = s.Config.Ephemeral, s.Config.AutoStopInterval, s.Config.AutoDeleteInterval
	alive := m.alive()
	if m.Status == sandbox.StatusPaused || !alive && (m.Config.Ephemeral || m.Config.AutoDeleteInterval > 0) {
		// It may need stopping or removing first (openMeta).
		return lookupSummary(ctx, stateDir, id)
	}
	info := &sandbox.Info{ID: m.ID, Name: "LocalSandbox", Provider: "local", Status: sandbox.StatusStopped, CreatedAt: m.CreatedAt, LastUsedAt: lastUsedAt(sfd, id, &m)}
	if alive {
		info.Status = sandbox.StatusRunning
		if m.Config.AutoStopInterval > 0 && !info.LastUsedAt.IsZero() {
			info.TimeoutAt = info.LastUsedAt.Add(m.Config.AutoStopInterval)
		}
	}
	return info, nil
}

// readMetaSummary decodes the summary of the metadata of the sandbox id
// (of the sandboxes folder sfd) into s, reading it into buf
// (maxMetaSummary+1 bytes); false
// when it cannot (no metadata, too large, not JSON), for the caller to
// take List's way, which says why. It reads with plain system calls: a
// regular file gains nothing from the runtime's poller.
func readMetaSummary(sfd int, id string, buf []byte, s *metaSummary) bool {
	fd, err := unix.Openat(sfd, id+"/"+metaFile, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	// One read: a regular file gives all it has, up to len(buf). A short
	// read (a file system that gives less) cuts the JSON, which then does
	// not decode, and List's way reads the file whole.
	n, err := unix.Read(fd, buf)
	for err == unix.EINTR {
		n, err = unix.Read(fd, buf)
	}
	if err != nil {
		return false
	}
	return n <= maxMetaSummary && json.Unmarshal(buf[:n], s) == nil
}

// lastUsedAt is lastUsed of the sandbox id of the sandboxes folder sfd,
// whose metadata is m: the later of m's time and the mtime of the
// activity stamp (a regular file, not followed), capped at now.
func lastUsedAt(sfd int, id string, m *meta) time.Time {
	t := m.LastUsedAt
	var st unix.Stat_t
	if unix.Fstatat(sfd, id+"/"+toolboxDir+"/"+activityFile, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return t
	}
	mt := time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC()
	if now := time.Now().UTC(); mt.After(now) {
		mt = now
	}
	if mt.After(t) {
		t = mt
	}
	return t
}

// lookupSummary is lookup, trimmed to a summary.
func lookupSummary(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
	in, err := lookup(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	return &sandbox.Info{ID: in.ID, Name: in.Name, Provider: in.Provider, Status: in.Status, CreatedAt: in.CreatedAt, LastUsedAt: in.LastUsedAt, TimeoutAt: in.TimeoutAt}, nil
}
