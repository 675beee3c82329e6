package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// A Pool keeps sandbox inits started ahead of time, so that creating a
// sandbox skips the slowest part of a start: making its namespaces, its
// network link and firewall, and the init's own start-up (the program
// re-executed). A spare init is a process in namespaces of its own, with a
// host uid range of its own and a network namespace linked to the
// internet, waiting for its configuration; nothing runs in it yet. A
// sandbox created through the pool (Options.Pool) takes a spare when its
// settings allow one, and the pool starts a replacement once that sandbox
// is up. A sandbox that cannot take a spare starts as it would without the
// pool.
//
// The host's process list shows a sandbox's init as "agentbox-init ID";
// one that was a spare shows as "agentbox-init" alone: its id was not
// known when it started.
//
// A sandbox takes a spare when it is new (not a restart of a stopped one)
// and has a network of its own (not the host mode); every other setting
// (image, limits, volumes, user …) is applied to the spare as it would be
// to a new init. A spare's firewall is the default network's: a sandbox
// in the blocked or allowList mode (Config.Network) has its policy
// put in place, as UpdateNetworkSettings would, before its init runs
// anything (a few milliseconds more than the default network's). A Pool
// needs root, as the sandboxes' own uid ranges and host-made network
// namespaces do.
//
// While it holds spares, the host has their links (agentbox<n>) and
// firewall tables, and their uid ranges are recorded in the state dir as
// taken. Close ends the spares and returns all of it; spares of a process
// that dies end with it (their network namespaces go with them; the next
// sandbox removal sweeps their firewall tables and the next range
// allocation their ranges).
type Pool struct {
	stateDir string
	size     int
	base     int
	netTest  netTestHooks // set by tests only (export_linux_test.go)

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	filler sync.Mutex // held by whoever starts spares
	wg     sync.WaitGroup

	mu        sync.Mutex
	spares    []*spare
	closed    bool
	refilling bool // a refill is pending
	delay     time.Duration
}

// PoolOptions configure a [Pool].
type PoolOptions struct {
	// StateDir is the state dir of the sandboxes the pool serves: a
	// sandbox takes a spare only when its Options.StateDir is this one.
	// Default: DefaultStateDir().
	StateDir string
	// Size is how many spare inits the pool keeps ready. Default 1; at
	// most MaxPoolSize.
	Size int
	// HostIDBase is the Options.HostIDBase of the sandboxes the pool
	// serves (0: the default).
	HostIDBase int
	// RefillDelay is how long after a sandbox took a spare (once it is
	// up) the pool starts the replacement, so that starting it does not
	// slow the new sandbox's first commands: a start keeps both cores of
	// a small machine busy for tens of milliseconds. Default
	// DefaultRefillDelay; negative: at once.
	RefillDelay time.Duration
}

// DefaultRefillDelay is the default PoolOptions.RefillDelay.
const DefaultRefillDelay = 500 * time.Millisecond

// MaxPoolSize bounds PoolOptions.Size: every spare holds a uid range, a
// network link and an idle process.
const MaxPoolSize = 32

// NewPool returns a pool for the sandboxes of opts.StateDir, empty: spares
// are started by Fill, and after each sandbox that takes one. Close it
// when done.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Size < 0 || opts.Size > MaxPoolSize {
		return nil, fmt.Errorf("%w: pool size %d: use 1 to %d (0: 1)", sandbox.ErrInvalidArgument, opts.Size, MaxPoolSize)
	}
	if opts.Size == 0 {
		opts.Size = 1
	}
	switch {
	case opts.RefillDelay == 0:
		opts.RefillDelay = DefaultRefillDelay
	case opts.RefillDelay < 0:
		opts.RefillDelay = 0
	}
	if err := validHostIDBase(opts.HostIDBase); err != nil {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrInvalidArgument, err)
	}
	abs, err := absStateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if err := poolAvailable(); err != nil {
		return nil, err
	}
	if err := CheckStateDir(abs); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{stateDir: abs, size: opts.Size, base: opts.HostIDBase, delay: opts.RefillDelay, ctx: ctx, cancel: cancel}, nil
}

// errPoolClosed is Fill's error once the pool is closed.
var errPoolClosed = errors.New("local: pool closed")

// Fill starts spare inits until the pool holds its Size, and returns once
// they are ready (or ctx ends): call it to warm the pool up before the
// first sandbox, or to wait for the replacements the pool starts in the
// background.
func (p *Pool) Fill(ctx context.Context) error {
	p.filler.Lock()
	defer p.filler.Unlock()
	for {
		p.mu.Lock()
		closed, n := p.closed, len(p.spares)
		p.mu.Unlock()
		if closed {
			return errPoolClosed
		}
		if n >= p.size {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		sp, err := p.startOne(ctx)
		if err != nil {
			return fmt.Errorf("local: start a spare sandbox init: %w", err)
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = sp.destroy(context.WithoutCancel(ctx), p.stateDir)
			return errPoolClosed
		}
		p.spares = append(p.spares, sp)
		p.mu.Unlock()
	}
}

// refill starts replacements for taken spares in the background, after
// the pool's RefillDelay.
func (p *Pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.refilling {
		return
	}
	p.refilling = true
	p.wg.Go(func() {
		t := time.NewTimer(p.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.ctx.Done():
		}
		p.mu.Lock()
		p.refilling = false
		p.mu.Unlock()
		_ = p.Fill(p.ctx)
	})
}

// take returns a spare, removed from the pool, or nil when it has none;
// the caller checked that the sandbox fits.
func (p *Pool) take() *spare {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.spares) > 0 {
		sp := p.spares[0]
		p.spares = p.spares[1:]
		if sp.alive() {
			return sp
		}
		// Ended meanwhile (killed): drop it.
		p.wg.Go(func() { _ = sp.destroy(context.Background(), p.stateDir) })
	}
	return nil
}

// fits reports whether the new sandbox m of handle s may take a spare.
func (p *Pool) fits(s *Sandbox, m *meta) bool {
	return s.opts.StateDir == p.stateDir && s.opts.HostIDBase == p.base && s.netTest == p.netTest &&
		m.HostIDs == nil && networkMode(&m.Config) != sandbox.NetworkHost
}

// Close ends the pool's spare inits and returns their links, firewall
// tables and uid ranges, waiting for the replacements being started. The
// sandboxes that took spares are theirs and stay. Close is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.cancel()
	p.mu.Unlock()
	p.wg.Wait()
	p.filler.Lock() // a Fill of the caller's ends too
	defer p.filler.Unlock()
	p.mu.Lock()
	spares := p.spares
	p.spares = nil
	p.mu.Unlock()
	var errs []error
	for _, sp := range spares {
		errs = append(errs, sp.destroy(context.Background(), p.stateDir))
	}
	return errors.Join(errs...)
}

// startOne starts a spare, giving up when ctx ends or the pool closes.
func (p *Pool) startOne(ctx context.Context) (*spare, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	return startSpare(ctx, p)
}

// sparePrefix starts the keys of spares' ranges in the id pool: no
// sandbox id contains ':'.
const sparePrefix = "spare:"

// spareKey returns a new key for a spare's range: this process's pid and
// start time (so that the range of a spare whose process died can be
// told and taken back), and a random part.
func spareKey() string {
	st, _ := procStartTime(os.Getpid())
	var b [4]byte
	_, _ = rand.Read(b[:])
	return sparePrefix + strconv.Itoa(os.Getpid()) + ":" + strconv.FormatUint(st, 10) + ":" + hex.EncodeToString(b[:])
}

// spareKeyLive reports whether the process that recorded the spare key
// still runs.
func spareKeyLive(key string) bool {
	f := strings.Split(strings.TrimPrefix(key, sparePrefix), ":")
	if len(f) != 3 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	st, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	now, ok := procStartTime(pid)
	return ok && now == st
}
