package daemon

import (
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// tether ties a command to its client (the tether extension): the command
// lives while its client shows signs of life, and is killed (abandon)
// once it has shown none for a grace period. Holders (a sync exec's
// request, a log follower) are signs of life for as long as they last;
// other requests about the command count once (touch).
type tether struct {
	grace time.Duration

	mu      sync.Mutex
	holders int
	last    time.Time     // the latest sign of life
	changed chan struct{} // closed and replaced when holders change
}

func newTether(grace time.Duration) *tether {
	return &tether{grace: grace, last: time.Now(), changed: make(chan struct{})}
}

// hold registers a holder; the returned function releases it.
func (t *tether) hold() (release func()) {
	if t == nil {
		return func() {}
	}
	t.update(+1)
	var once sync.Once
	return func() { once.Do(func() { t.update(-1) }) }
}

func (t *tether) update(d int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.holders += d
	t.last = time.Now()
	close(t.changed)
	t.changed = make(chan struct{})
}

// touch records a sign of life.
func (t *tether) touch() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.last = time.Now()
	t.mu.Unlock()
}

// watch abandons c once the tether has had no holder and no touch for its
// grace period, unless c ends first.
func (t *tether) watch(c *command) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.mu.Lock()
		holders, left, changed := t.holders, t.grace-time.Since(t.last), t.changed
		t.mu.Unlock()
		var expired <-chan time.Time
		if holders == 0 {
			if left <= 0 {
				c.abandon()
				return
			}
			if timer == nil {
				timer = time.NewTimer(left)
			} else {
				timer.Reset(left)
			}
			expired = timer.C
		}
		select {
		case <-c.done:
			return
		case <-changed:
		case <-expired:
		}
	}
}

// abandon kills c, whose client is gone (the tether extension): its
// process tree now, or, when it waits for its turn, before it starts.
func (c *command) abandon() {
	c.mu.Lock()
	if c.exitCode != nil {
		c.mu.Unlock()
		return
	}
	c.abandoned = true
	pgid, marker := c.pgid, c.marker
	c.mu.Unlock()
	if pgid > 0 {
		killTree([]int{pgid}, marker)
	}
}

// tetherOf returns the tether of a command run with the tether extension,
// nil otherwise.
func tetherOf(tethered bool) *tether {
	if !tethered {
		return nil
	}
	return newTether(toolbox.TetherGrace)
}
