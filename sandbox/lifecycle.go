package sandbox

import (
	"context"
	"fmt"
	"maps"
	"sync"
)

// Driver is what an engine provides to a [Lifecycle]: the acts of acquiring,
// stopping and destroying its sandbox. Lifecycle serialises the calls, so a
// Driver need not guard against concurrent lifecycle calls.
type Driver interface {
	// Acquire connects to the sandbox if it exists, restarting it when it
	// was stopped (OutcomeConnected), or creates it (OutcomeCreated).
	Acquire(ctx context.Context) (Outcome, error)
	// Release stops the sandbox, keeping its files.
	Release(ctx context.Context) error
	// Teardown removes the sandbox permanently.
	Teardown(ctx context.Context) error
}

// Hooks run around lifecycle transitions. Each receives the Lifecycle's ID.
// An error from a hook fails the transition and leaves the status "error".
type Hooks struct {
	// OnStart runs after the sandbox is running, on every start. Its failure
	// is fatal to the start; the next start runs it again.
	OnStart func(ctx context.Context, id string, outcome Outcome) error
	// OnStop runs before the sandbox stops.
	OnStop func(ctx context.Context, id string) error
	// OnDestroy runs before the sandbox is destroyed.
	OnDestroy func(ctx context.Context, id string) error
}

// Lifecycle implements the lifecycle rules shared by all engines: coalesced
// concurrent starts, ordered stop and destroy, status transitions, hooks and
// the runtime environment overlay. Engines embed a *Lifecycle and supply a
// Driver. Its methods are safe for concurrent use.
type Lifecycle struct {
	id     string
	driver Driver
	hooks  Hooks

	mu      sync.Mutex
	status  Status
	lastErr error
	env     map[string]string
	start   *call // in-flight start
	stop    *call // in-flight stop
	destroy *call // in-flight destroy
}

type call struct {
	done    chan struct{}
	outcome Outcome
	err     error
}

// NewLifecycle returns a Lifecycle in status pending for the sandbox id.
// env seeds the runtime environment overlay (it is copied); its names must
// be valid.
func NewLifecycle(id string, d Driver, hooks Hooks, env map[string]string) (*Lifecycle, error) {
	if err := ValidateEnv(env); err != nil {
		return nil, err
	}
	return &Lifecycle{id: id, driver: d, hooks: hooks, status: StatusPending, env: maps.Clone(env)}, nil
}

// ID returns the sandbox id.
func (l *Lifecycle) ID() string { return l.id }

// Status returns the current status.
func (l *Lifecycle) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status
}

// Err returns the error that put the sandbox in status "error", if any.
func (l *Lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status != StatusError {
		return nil
	}
	return l.lastErr
}

// SetStatus forces the status. Engines use it when they learn of a change
// from outside, e.g. a sandbox found dead becomes StatusStopped.
func (l *Lifecycle) SetStatus(s Status) {
	l.mu.Lock()
	l.status = s
	l.mu.Unlock()
}

// Start runs the start transition: a running sandbox returns
// OutcomeConnected at once; a destroyed one fails with ErrDestroyed;
// concurrent calls share one attempt, and a failed attempt is not remembered.
func (l *Lifecycle) Start(ctx context.Context) (Outcome, error) {
	for {
		l.mu.Lock()
		if l.status == StatusRunning {
			l.mu.Unlock()
			return OutcomeConnected, nil
		}
		// Wait out an in-flight stop or destroy; their errors propagate.
		if c := firstNonNil(l.destroy, l.stop); c != nil {
			l.mu.Unlock()
			if err := c.wait(ctx); err != nil {
				return "", err
			}
			continue
		}
		if l.status == StatusDestroyed {
			l.mu.Unlock()
			return "", fmt.Errorf("cannot start sandbox %q: %w", l.id, ErrDestroyed)
		}
		c := l.start
		if c == nil {
			c = &call{done: make(chan struct{})}
			l.start = c
			l.status = StatusStarting
			l.mu.Unlock()
			// The attempt is shared, so it must not die with one caller's
			// context: it runs to completion under a context that keeps the
			// values but not the cancellation of the first caller.
			go l.runStart(context.WithoutCancel(ctx), c)
		} else {
			l.mu.Unlock()
		}
		if err := c.wait(ctx); err != nil {
			return "", err
		}
		return c.outcome, c.err
	}
}

func (l *Lifecycle) runStart(ctx context.Context, c *call) {
	defer close(c.done)
	outcome, err := l.driver.Acquire(ctx)
	if err == nil {
		l.SetStatus(StatusRunning)
		if l.hooks.OnStart != nil {
			if herr := l.hooks.OnStart(ctx, l.id, outcome); herr != nil {
				err = &HookError{ID: l.id, Hook: "onStart", Err: herr}
			}
		}
	}
	l.mu.Lock()
	l.start = nil
	if err != nil {
		l.status, l.lastErr = StatusError, err
	} else {
		l.status = StatusRunning
	}
	l.mu.Unlock()
	c.outcome, c.err = outcome, err
}

// EnsureRunning starts the sandbox unless it is running. During stop and
// destroy it returns nil so that teardown may still run commands. It fails
// with an error matching ErrNotReady otherwise.
func (l *Lifecycle) EnsureRunning(ctx context.Context) error {
	switch l.Status() {
	case StatusRunning, StatusStopping, StatusDestroying:
		return nil
	case StatusDestroyed:
		return &NotReadyError{ID: l.id, Err: ErrDestroyed}
	}
	if _, err := l.Start(ctx); err != nil {
		return &NotReadyError{ID: l.id, Err: err}
	}
	if s := l.Status(); s != StatusRunning {
		return &NotReadyError{ID: l.id, Err: fmt.Errorf("status is %s", s)}
	}
	return nil
}

// Stop runs the stop transition. Stopping a stopped or destroyed sandbox
// does nothing; an in-flight start is awaited first; concurrent calls share
// one attempt. As in Mastra, a pending sandbox is stopped too: the engine
// stops whatever runs under this sandbox's id (e.g. started by another
// process) and the status becomes stopped.
func (l *Lifecycle) Stop(ctx context.Context) error {
	return l.transition(ctx, &l.stop, StatusStopping, StatusStopped, func(s Status) bool {
		return s == StatusStopped || s == StatusDestroyed
	}, func(ctx context.Context) error {
		if l.hooks.OnStop != nil {
			if err := l.hooks.OnStop(ctx, l.id); err != nil {
				return &HookError{ID: l.id, Hook: "onStop", Err: err}
			}
		}
		return l.driver.Release(ctx)
	})
}

// Destroy runs the destroy transition. A pending sandbox becomes destroyed
// without any engine call; a destroyed one stays so.
func (l *Lifecycle) Destroy(ctx context.Context) error {
	l.mu.Lock()
	if l.status == StatusPending && l.start == nil {
		l.status = StatusDestroyed
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	return l.transition(ctx, &l.destroy, StatusDestroying, StatusDestroyed, func(s Status) bool {
		return s == StatusDestroyed
	}, func(ctx context.Context) error {
		if l.hooks.OnDestroy != nil {
			if err := l.hooks.OnDestroy(ctx, l.id); err != nil {
				return &HookError{ID: l.id, Hook: "onDestroy", Err: err}
			}
		}
		return l.driver.Teardown(ctx)
	})
}

// transition runs a stop-like transition coalesced through slot.
func (l *Lifecycle) transition(ctx context.Context, slot **call, during, after Status, noop func(Status) bool, act func(context.Context) error) error {
	for {
		l.mu.Lock()
		if *slot != nil {
			c := *slot
			l.mu.Unlock()
			return c.wait(ctx)
		}
		if noop(l.status) {
			l.mu.Unlock()
			return nil
		}
		// Await in-flight transitions of other kinds, ignoring their errors.
		if c := firstNonNil(l.start, l.stop, l.destroy); c != nil {
			l.mu.Unlock()
			if err := c.wait(ctx); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		c := &call{done: make(chan struct{})}
		*slot = c
		l.status = during
		l.mu.Unlock()

		err := act(context.WithoutCancel(ctx))
		l.mu.Lock()
		*slot = nil
		if err != nil {
			l.status, l.lastErr = StatusError, err
		} else {
			l.status = after
		}
		l.mu.Unlock()
		c.err = err
		close(c.done)
		return err
	}
}

func (c *call) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func firstNonNil(cs ...*call) *call {
	for _, c := range cs {
		if c != nil {
			return c
		}
	}
	return nil
}

// SetEnv replaces the runtime environment overlay with update(copy of the
// overlay). The overlay is never written into the sandbox; it is merged into
// each command's environment. Names are validated before anything changes.
func (l *Lifecycle) SetEnv(update func(env map[string]string) map[string]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := update(maps.Clone(l.env))
	if err := ValidateEnv(next); err != nil {
		return err
	}
	l.env = maps.Clone(next)
	return nil
}

// Env returns a copy of the runtime environment overlay.
func (l *Lifecycle) Env() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.env)
}

// MergeEnv returns the overlay merged with perCall, perCall winning, after
// validating every name. With an empty overlay perCall is returned as is.
func (l *Lifecycle) MergeEnv(perCall map[string]string) (map[string]string, error) {
	l.mu.Lock()
	overlay := l.env
	l.mu.Unlock()
	if err := ValidateEnv(perCall); err != nil {
		return nil, err
	}
	if len(overlay) == 0 {
		return perCall, nil
	}
	out := maps.Clone(overlay)
	maps.Copy(out, perCall)
	return out, nil
}
