package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

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
		return session{}, m.fail("creating a session", err)
	}
	return session{id: id, gen: gen}, nil
}

// Warm creates a session for the pool when it holds none, so that the
// next command runs in one request instead of two (create the session,
// then run). Engines call it when a sandbox starts. Best effort: on
// failure the next command creates its session itself.
func (m *Manager) Warm(ctx context.Context) {
	m.mu.Lock()
	gen, empty := m.gen, len(m.idle) == 0
	m.mu.Unlock()
	if !empty {
		return
	}
	m.addIdle(ctx, gen)
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
	m.bg.Go(func() {
		if keep {
			m.replenish(s.gen)
		}
		m.deleteSession(s.id)
	})
}

// replenish creates a session and adds it to the pool of generation gen,
// unless the pool has been reset or filled meanwhile. Best effort: on
// failure the next command creates one.
func (m *Manager) replenish(gen uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	m.addIdle(ctx, gen)
}

// addIdle creates a session and adds it to the pool of generation gen,
// unless the pool has been reset or filled meanwhile (then it deletes the
// session). Best effort.
func (m *Manager) addIdle(ctx context.Context, gen uint64) {
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
