package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Pausing a sandbox freezes every one of its processes (its init
// included) in its cgroups' freezer: their memory, sockets and open files
// stay as they are, and they use no CPU. The metadata records it (status
// "paused", PausedAt), so that every host process sees it, and a marker
// file in the sandbox's folder (pausedFile) tells a request at the cost
// of a stat that it must resume the sandbox first: every request to the
// toolbox API goes through resumingTransport or DialToolbox, and a
// command or Start resumes the sandbox before anything else.
//
// The init's auto-stop timer is frozen with it; host processes apply it
// instead: a paused sandbox idle (no toolbox request) for longer than its
// AutoStopInterval is stopped by the next List, Open, command or Resume
// that finds it (and then removed if ephemeral, or later by its
// AutoDeleteInterval), as its init would have stopped it had it run.

// pausedFile is in the folder of a sandbox while it is paused.
const pausedFile = "paused"

// errIdleStopped: a paused sandbox was found idle past its
// AutoStopInterval, and stopped.
var errIdleStopped = errors.New("it was paused longer than its auto-stop interval allows, so it was stopped as its init would have stopped it (its processes and their memory are gone, its files are kept): start it again")

// freezeSandbox freezes every process of the running sandbox whose
// metadata is m, its init included, for a consistent copy of its files
// (a fork, a live snapshot), and returns the function that lets them run
// again. A paused sandbox stays paused: its thaw does nothing. Without a
// freezer (no cgroups: not root; or cgroups made before sandboxes got a
// freezer) it fails with an error matching sandbox.ErrUnsupported; for a
// sandbox that is not running, with one matching sandbox.ErrInvalidState.
func freezeSandbox(ctx context.Context, m *meta) (thaw func(context.Context) error, err error) {
	if !m.alive() {
		return nil, fmt.Errorf("freeze sandbox %s: %w: it is not running", m.ID, sandbox.ErrInvalidState)
	}
	if m.Cgroups == nil {
		return nil, fmt.Errorf("freeze sandbox %s: %w: it has no cgroups (sandboxes get them when the engine runs as root)", m.ID, sandbox.ErrUnsupported)
	}
	if m.Cgroups.Frozen() {
		return func(context.Context) error { return nil }, nil
	}
	if err := m.Cgroups.Freeze(ctx); err != nil {
		return nil, fmt.Errorf("freeze sandbox %s: %w", m.ID, err)
	}
	return m.Cgroups.Thaw, nil
}

// Pause freezes every process of the running sandbox, keeping their
// memory, sockets and open files; Info reports it "paused" in every
// process, and it uses no CPU. The next command, request to its toolbox
// API (DialToolbox too), Start or Resume resumes it; Stop and Destroy
// work on it as on a running sandbox. Pause of a paused sandbox does
// nothing. It fails with an error matching sandbox.ErrInvalidState when
// the sandbox is not running, and sandbox.ErrUnsupported when it has no
// freezer (cgroups need root). Timers of the sandbox's own processes see
// the paused time as elapsed; a paused sandbox idle past its
// AutoStopInterval is stopped (see the package documentation).
func (s *Sandbox) Pause(ctx context.Context) error {
	if s.Status() == sandbox.StatusDestroyed {
		return fmt.Errorf("pause sandbox %q: %w", s.opts.ID, sandbox.ErrDestroyed)
	}
	if err := withSandboxLock(ctx, s.opts.StateDir, s.opts.ID, pauseLocked); err != nil {
		return err
	}
	s.SetStatus(sandbox.StatusPaused)
	return nil
}

// Resume lets the processes of the paused sandbox run on where they were.
// Resume of a running sandbox does nothing. It fails with an error
// matching sandbox.ErrInvalidState when the sandbox is not running, or
// was stopped because it stayed paused past its AutoStopInterval.
func (s *Sandbox) Resume(ctx context.Context) error {
	if s.Status() == sandbox.StatusDestroyed {
		return fmt.Errorf("resume sandbox %q: %w", s.opts.ID, sandbox.ErrDestroyed)
	}
	err := resume(ctx, s.opts.StateDir, s.opts.ID, resumeExplicit)
	s.afterResume(err)
	if errors.Is(err, errIdleStopped) {
		return fmt.Errorf("resume sandbox %q: %w: %w", s.opts.ID, sandbox.ErrInvalidState, err)
	}
	return err
}

// Start starts the sandbox as [sandbox.Lifecycle.Start] does, resuming it
// first when it is paused.
func (s *Sandbox) Start(ctx context.Context) (sandbox.Outcome, error) {
	if err := s.resumeBeforeUse(ctx); err != nil {
		return "", err
	}
	return s.Lifecycle.Start(ctx)
}

// resumeBeforeUse resumes the sandbox when it is paused, before a command
// or a start. One stopped for idling while paused is marked stopped, so
// that the command starts it again, as after an auto-stop.
func (s *Sandbox) resumeBeforeUse(ctx context.Context) error {
	err := resumeDir(ctx, s.dir)
	s.afterResume(err)
	if errors.Is(err, errIdleStopped) {
		return nil
	}
	return err
}

// afterResume sets the handle's status after a resume that ended with
// err.
func (s *Sandbox) afterResume(err error) {
	switch {
	case errors.Is(err, errIdleStopped):
		s.SetStatus(sandbox.StatusStopped)
	case err == nil && s.Status() == sandbox.StatusPaused:
		s.SetStatus(sandbox.StatusRunning)
	}
}

// resumeDir resumes the sandbox of the folder dir if it is paused: a
// stat when it is not.
func resumeDir(ctx context.Context, dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, pausedFile)); err != nil {
		return nil
	}
	return resume(ctx, filepath.Dir(filepath.Dir(dir)), filepath.Base(dir), resumeForUse)
}

// resumeMode says what resume does with a sandbox.
type resumeMode int

const (
	resumeExplicit resumeMode = iota // Resume: a stopped sandbox is an error
	resumeForUse                     // before a use: a stopped one is left to start
	expireOnly                       // List, Open: only stop one idle past its time
)

// resume resumes the sandbox id of stateDir when it is paused (but not
// with expireOnly), or stops it when it idled past its AutoStopInterval
// (errIdleStopped; an ephemeral one is removed). A sandbox that does not
// run is an error matching sandbox.ErrInvalidState with resumeExplicit,
// else nothing to do.
func resume(ctx context.Context, stateDir, id string, mode resumeMode) error {
	var ephemeral bool
	err := withSandboxLock(ctx, stateDir, id, func(ctx context.Context, dir string, m *meta) error {
		ephemeral = m.Config.Ephemeral
		return resumeLocked(ctx, dir, m, mode)
	})
	if errors.Is(err, errIdleStopped) && ephemeral {
		if rerr := remove(ctx, stateDir, id); rerr != nil && !errors.Is(rerr, sandbox.ErrNotFound) {
			return rerr
		}
	}
	return err
}

// withSandboxLock runs f on the metadata of the sandbox id of stateDir,
// its folder locked; f writes the metadata when it changes it.
func withSandboxLock(ctx context.Context, stateDir, id string, f func(ctx context.Context, dir string, m *meta) error) error {
	stateDir, l, err := lockExisting(ctx, stateDir, id)
	if err != nil {
		return err
	}
	defer l.unlock()
	m, err := readMeta(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return notFound(stateDir, id)
	}
	if err != nil {
		return fmt.Errorf("sandbox %q: read metadata: %w", id, err)
	}
	return f(ctx, l.path, &m)
}

// pauseLocked pauses the sandbox of the locked folder dir (metadata m):
// freeze, then the marker, then the metadata, undoing them on failure.
func pauseLocked(ctx context.Context, dir string, m *meta) error {
	if !m.alive() {
		return fmt.Errorf("pause sandbox %q: %w: it is stopped (start it first)", m.ID, sandbox.ErrInvalidState)
	}
	if m.Cgroups == nil {
		return fmt.Errorf("pause sandbox %q: %w: it has no cgroups to freeze it in (sandboxes get them when the engine runs as root)", m.ID, sandbox.ErrUnsupported)
	}
	if err := m.Cgroups.Freeze(ctx); err != nil {
		return fmt.Errorf("pause sandbox %q: %w", m.ID, err)
	}
	err := os.WriteFile(filepath.Join(dir, pausedFile), nil, 0o600)
	if err == nil && m.Status != sandbox.StatusPaused {
		m.Status, m.PausedAt = sandbox.StatusPaused, time.Now().UTC()
		err = writeMeta(dir, m)
	}
	if err != nil {
		_ = os.Remove(filepath.Join(dir, pausedFile))
		_ = m.Cgroups.Thaw(context.WithoutCancel(ctx))
		return fmt.Errorf("pause sandbox %q: record the pause: %w", m.ID, err)
	}
	return nil
}

// resumeLocked resumes the sandbox of the locked folder dir (metadata
// m), or stops it when it idled past its AutoStopInterval (see resume).
func resumeLocked(ctx context.Context, dir string, m *meta, mode resumeMode) error {
	if !m.alive() {
		_ = os.Remove(filepath.Join(dir, pausedFile))
		if mode == resumeExplicit {
			return fmt.Errorf("resume sandbox %q: %w: it is stopped (start it)", m.ID, sandbox.ErrInvalidState)
		}
		return nil
	}
	if idlePaused(dir, m) {
		if err := stopLocked(ctx, dir, m); err != nil {
			return err
		}
		return fmt.Errorf("sandbox %q: %w", m.ID, errIdleStopped)
	}
	if mode == expireOnly {
		return nil
	}
	if err := m.Cgroups.Thaw(ctx); err != nil {
		return fmt.Errorf("resume sandbox %q: %w", m.ID, err)
	}
	if m.Status == sandbox.StatusPaused {
		m.Status, m.PausedAt = sandbox.StatusRunning, time.Time{}
		if err := writeMeta(dir, m); err != nil {
			return fmt.Errorf("resume sandbox %q: record it: %w", m.ID, err)
		}
	}
	_ = os.Remove(filepath.Join(dir, pausedFile))
	return nil
}

// thawForStop lets the processes of a paused sandbox run again before it
// is stopped (frozen v1 tasks cannot die) and clears the pause from m
// and the folder dir; the caller writes m.
func thawForStop(ctx context.Context, dir string, m *meta) {
	if m.Status == sandbox.StatusPaused || m.Cgroups.Frozen() {
		_ = m.Cgroups.Thaw(ctx)
	}
	if m.Status == sandbox.StatusPaused {
		m.Status = sandbox.StatusRunning
	}
	m.PausedAt = time.Time{}
	_ = os.Remove(filepath.Join(dir, pausedFile))
}

// idlePaused reports whether the sandbox of the folder dir (metadata m)
// is paused and idle past its AutoStopInterval: the time since its last
// toolbox request (its init's measure; the pause when none is known).
func idlePaused(dir string, m *meta) bool {
	if m.Status != sandbox.StatusPaused || m.Config.AutoStopInterval <= 0 || !m.alive() {
		return false
	}
	last := lastUsed(dir, m)
	if last.IsZero() {
		last = m.PausedAt
	}
	return time.Since(last) >= m.Config.AutoStopInterval
}

// stopIdlePaused stops the sandbox id of stateDir (its folder dir,
// metadata m) when it is paused and idle past its AutoStopInterval, as
// its frozen init cannot (an ephemeral one is removed), and updates m.
func stopIdlePaused(ctx context.Context, stateDir, id, dir string, m *meta) error {
	if !idlePaused(dir, m) {
		return nil
	}
	err := resume(ctx, stateDir, id, expireOnly)
	if err != nil && !errors.Is(err, errIdleStopped) {
		return err
	}
	nm, err := readMeta(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return notFound(stateDir, id)
	}
	if err != nil {
		return fmt.Errorf("sandbox %q: read metadata: %w", id, err)
	}
	*m = nm
	return nil
}

// resumingTransport resumes a paused sandbox (of the folder dir) before
// each request to its toolbox API.
type resumingTransport struct {
	dir  string
	base *http.Transport
}

// RoundTrip resumes the sandbox if it is paused, then sends req.
func (t resumingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := resumeDir(req.Context(), t.dir); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &sandbox.NotReadyError{ID: filepath.Base(t.dir), Err: err}
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the base
// transport.
func (t resumingTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }
