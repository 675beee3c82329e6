package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// Host is what a Manager needs from the sandbox that owns it.
// *sandbox.Lifecycle implements it.
type Host interface {
	// EnsureRunning starts the sandbox unless it runs.
	EnsureRunning(ctx context.Context) error
	// MergeEnv returns the sandbox's environment overlay merged with
	// perCall (perCall winning), failing with an error matching
	// sandbox.ErrInvalidEnv for a bad name.
	MergeEnv(perCall map[string]string) (map[string]string, error)
}

// Options configures a Manager.
type Options struct {
	// Client talks to the sandbox's toolbox API. Required.
	Client *toolbox.Client
	// Host starts the sandbox on demand and supplies its environment
	// overlay. When nil the sandbox is assumed to run and only the per-call
	// environment is used.
	Host Host
	// DefaultTimeout applies to commands and processes whose options leave
	// Timeout at 0. Zero means sandbox.DefaultTimeout; negative means none.
	DefaultTimeout time.Duration
	// DefaultCwd is the working directory of commands that set none. Empty
	// means the toolbox server's work directory.
	DefaultCwd string
	// SessionPrefix starts the id of every session the Manager creates.
	// Default "agentbox-".
	SessionPrefix string
	// MaxIdleSessions caps the pool of idle sessions. Zero means 4; a
	// negative value disables pooling (every command gets a new session,
	// deleted afterwards).
	MaxIdleSessions int
}

// DefaultMaxIdleSessions is the pool size used when
// Options.MaxIdleSessions is 0.
const DefaultMaxIdleSessions = 4

// DefaultSpawnRetainedBytes is how many bytes of each stream a spawned
// process retains when its options leave MaxRetainedBytes at 0.
const DefaultSpawnRetainedBytes = 1 << 20

// cleanupTimeout bounds the best-effort requests (deleting a session) made
// on behalf of a caller whose context is already done.
const cleanupTimeout = 10 * time.Second

// Manager runs commands (Execute) and background processes (Spawn, List,
// Get, Kill) in one sandbox through its toolbox API. It implements
// sandbox.ProcessManager. Its methods are safe for concurrent use.
type Manager struct {
	client         *toolbox.Client
	host           Host
	defaultTimeout time.Duration
	defaultCwd     string
	prefix         string
	maxIdle        int
	limits         poolLimits

	bg tracker // goroutines Close waits for: session retirements, abandoned stdin copies

	mu     sync.Mutex
	idle   []session        // idle pooled sessions, most recent last
	gen    uint64           // bumped by Reset: older sessions never return to the pool
	procs  map[string]*proc // tracked processes by pid
	order  []string         // pids in spawn order
	nextID uint64           // last pid number handed out
}

var _ sandbox.ProcessManager = (*Manager)(nil)

// NewManager returns a Manager for the sandbox behind opts.Client. It makes
// no request; sessions are created when commands need them. It panics if
// opts.Client is nil.
func NewManager(opts Options) *Manager {
	if opts.Client == nil {
		panic("process.NewManager: Options.Client is nil; pass the sandbox's *toolbox.Client")
	}
	m := &Manager{
		client:         opts.Client,
		host:           opts.Host,
		defaultTimeout: opts.DefaultTimeout,
		defaultCwd:     opts.DefaultCwd,
		prefix:         opts.SessionPrefix,
		maxIdle:        opts.MaxIdleSessions,
		limits:         defaultPoolLimits,
		procs:          make(map[string]*proc),
	}
	if m.defaultTimeout == 0 {
		m.defaultTimeout = sandbox.DefaultTimeout
	}
	if m.prefix == "" {
		m.prefix = "agentbox-"
	}
	if m.maxIdle == 0 {
		m.maxIdle = DefaultMaxIdleSessions
	}
	return m
}

// session is a toolbox session held by one command.
type session struct {
	id        string
	gen       uint64
	pooled    bool  // taken from the pool (it may have vanished with a restart)
	uses      int   // commands it ran before this one
	logged    int64 // output bytes of those commands the server still keeps
	stateless bool  // the current command runs with the stateless extension
}

// poolLimits says when a pooled session is retired: deleted (which frees
// everything the server keeps for it) and replaced in the background.
type poolLimits struct {
	uses          int   // commands, without the stateless extension
	statelessUses int   // commands, with it
	logBytes      int64 // output the server keeps
}

// defaultPoolLimits: a plain Daytona server keeps every command's log until
// its session is deleted, so a session is retired after 64 commands or
// 64 MiB of output. A server with the stateless extension drops a
// stateless command's log once it was delivered (the sync answer, or a
// frames follow); only its list of commands grows, so such a session
// serves 4096 commands. Output whose delivery the server did not learn of
// (a follow that fell back to polling) still counts.
var defaultPoolLimits = poolLimits{uses: 64, statelessUses: 4096, logBytes: 64 << 20}

// acquire takes an idle session or creates one.
func (m *Manager) acquire(ctx context.Context) (session, error) {
	m.mu.Lock()
	gen := m.gen
	if n := len(m.idle); n > 0 {
		s := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		s.gen, s.pooled = gen, true
		return s, nil
	}
	m.mu.Unlock()
	id := m.prefix + randomID()
	if err := m.client.CreateSession(ctx, id); err != nil {
		if ctx.Err() != nil {
			return session{}, ctx.Err()
		}
		return session{}, &toolboxError{op: "creating a session", err: err}
	}
	return session{id: id, gen: gen}, nil
}

// release returns a session whose command finished normally to the pool;
// kept is how many bytes of the command's output the server keeps (0 when
// it dropped the log). It deletes the session instead when the pool is
// full or was reset since, and retires it when it has served long enough:
// then, in the background, a new session takes its place in the pool and
// the old one is deleted, so that no command waits for either.
func (m *Manager) release(s session, kept int64) {
	s.uses++
	s.logged += kept
	limit := m.limits.uses
	if s.stateless {
		limit = m.limits.statelessUses
	}
	retire := s.uses >= limit || s.logged >= m.limits.logBytes
	m.mu.Lock()
	keep := s.gen == m.gen && len(m.idle) < m.maxIdle
	if keep && !retire {
		s.stateless = false
		m.idle = append(m.idle, s)
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	if !retire {
		m.deleteSession(s.id)
		return
	}
	m.bg.add()
	go func() {
		defer m.bg.done()
		if keep {
			m.replenish(s.gen)
		}
		m.deleteSession(s.id)
	}()
}

// replenish creates a session and adds it to the pool of generation gen,
// unless the pool has been reset or filled meanwhile. Best effort: on
// failure the next command creates one.
func (m *Manager) replenish(gen uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	id := m.prefix + randomID()
	if err := m.client.CreateSession(ctx, id); err != nil {
		return
	}
	m.mu.Lock()
	if gen == m.gen && len(m.idle) < m.maxIdle {
		m.idle = append(m.idle, session{id: id, gen: gen})
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.deleteSession(id)
}

// tracker counts goroutines that Close waits for. Unlike a
// sync.WaitGroup it may gain goroutines while someone waits.
type tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (t *tracker) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.idle)
	}
}

// wait waits until no goroutine is tracked, or ctx is done.
func (t *tracker) wait(ctx context.Context) error {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return nil
	}
	ch := t.idle
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deleteSession deletes a session, which kills whatever runs in it. It is
// best effort: the session may already be gone.
func (m *Manager) deleteSession(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err := m.client.DeleteSession(ctx, id)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return &toolboxError{op: "deleting a session", err: err}
	}
	return nil
}

// stale reports that a pooled session of generation gen vanished: the
// sandbox restarted, so every idle session of that generation is gone too.
func (m *Manager) stale(gen uint64) {
	m.mu.Lock()
	if gen == m.gen {
		m.idle = nil
		m.gen++
	}
	m.mu.Unlock()
}

// Reset forgets the pooled sessions without deleting them. Engines call it
// when the sandbox restarted, which ended its sessions. Sessions in use at
// the time are deleted, not pooled, when their commands end.
func (m *Manager) Reset() {
	m.mu.Lock()
	m.idle = nil
	m.gen++
	m.mu.Unlock()
}

// Close kills every tracked process that still runs, forgets every tracked
// process and deletes the pooled sessions. It waits, until ctx is done, for
// the goroutines of those processes and the Manager's background work to
// end (retired sessions being deleted, and the copying of a Stdin, which
// ends once a blocked Read returns). The Manager stays usable: later calls
// create new sessions.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	procs := make([]*proc, 0, len(m.procs))
	for _, pid := range m.order {
		if p := m.procs[pid]; p != nil {
			procs = append(procs, p)
		}
	}
	m.procs = make(map[string]*proc)
	m.order = nil
	idle := m.idle
	m.idle = nil
	m.gen++
	m.mu.Unlock()

	var errs []error
	for _, p := range procs {
		if _, err := p.Kill(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range idle {
		if err := m.deleteSession(s.id); err != nil {
			errs = append(errs, err)
		}
	}
	waitErr := m.bg.wait(ctx)
	for _, p := range procs {
		if waitErr != nil {
			break
		}
		waitErr = p.waitGoroutines(ctx)
	}
	if waitErr != nil {
		errs = append(errs, fmt.Errorf("process: waiting for background work: %w", waitErr))
	}
	return errors.Join(errs...)
}

// idleSessions returns the ids of the pooled sessions (for tests).
func (m *Manager) idleSessions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, len(m.idle))
	for i, s := range m.idle {
		ids[i] = s.id
	}
	return ids
}

func randomID() string {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand.Read panics instead)
	return hex.EncodeToString(b[:])
}

// toolboxError wraps a failed toolbox request with what the Manager was
// doing. It never includes the command or its environment (they may hold
// secrets).
type toolboxError struct {
	op  string
	err error
}

func (e *toolboxError) Error() string { return "process: " + e.op + ": " + e.err.Error() }
func (e *toolboxError) Unwrap() error { return e.err }
