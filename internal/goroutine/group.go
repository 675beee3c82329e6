// Package goroutine tracks goroutines so that their owner can wait until
// all of them have ended, as a Close method must.
package goroutine

import (
	"context"
	"sync"
)

// Group tracks goroutines. Unlike a sync.WaitGroup, goroutines may join
// while someone waits: a tracked goroutine may start others, and Wait
// returns once none runs. The zero value is ready to use; a Group must not
// be copied after first use.
type Group struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

// Go runs f in a new goroutine tracked by g.
func (g *Group) Go(f func()) {
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
	go func() {
		defer g.done()
		f()
	}()
}

func (g *Group) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 {
		close(g.idle)
	}
}

// Wait waits until no goroutine of g runs, or until ctx is done; then it
// returns ctx's error.
func (g *Group) Wait(ctx context.Context) error {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return nil
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
