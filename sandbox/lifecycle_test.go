package sandbox

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeDriver struct {
	acquires, releases, teardowns atomic.Int32
	acquireDelay                  time.Duration
	acquireErr                    error
	running                       atomic.Bool
}

func (d *fakeDriver) Acquire(ctx context.Context) (Outcome, error) {
	d.acquires.Add(1)
	time.Sleep(d.acquireDelay)
	if d.acquireErr != nil {
		return "", d.acquireErr
	}
	if d.running.Swap(true) {
		return OutcomeConnected, nil
	}
	return OutcomeCreated, nil
}
func (d *fakeDriver) Release(ctx context.Context) error {
	d.releases.Add(1)
	d.running.Store(false)
	return nil
}
func (d *fakeDriver) Teardown(ctx context.Context) error {
	d.teardowns.Add(1)
	d.running.Store(false)
	return nil
}

func TestLifecycleTransitions(t *testing.T) {
	ctx := context.Background()
	d := &fakeDriver{}
	l, err := NewLifecycle("sb1", d, Hooks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Status() != StatusPending {
		t.Fatalf("new status %s", l.Status())
	}
	out, err := l.Start(ctx)
	if err != nil || out != OutcomeCreated || l.Status() != StatusRunning {
		t.Fatalf("Start = %v, %v, status %s", out, err, l.Status())
	}
	if out, _ := l.Start(ctx); out != OutcomeConnected || d.acquires.Load() != 1 {
		t.Fatalf("second Start = %v, acquires %d; want connected without acquiring", out, d.acquires.Load())
	}
	if err := l.Stop(ctx); err != nil || l.Status() != StatusStopped || d.releases.Load() != 1 {
		t.Fatalf("Stop: %v, status %s, releases %d", err, l.Status(), d.releases.Load())
	}
	if err := l.Stop(ctx); err != nil || d.releases.Load() != 1 {
		t.Fatalf("second Stop must be a no-op: %v, releases %d", err, d.releases.Load())
	}
	if err := l.EnsureRunning(ctx); err != nil || l.Status() != StatusRunning {
		t.Fatalf("EnsureRunning after stop: %v, %s", err, l.Status())
	}
	if err := l.Destroy(ctx); err != nil || l.Status() != StatusDestroyed || d.teardowns.Load() != 1 {
		t.Fatalf("Destroy: %v, %s", err, l.Status())
	}
	if _, err := l.Start(ctx); !errors.Is(err, ErrDestroyed) {
		t.Fatalf("Start after destroy = %v, want ErrDestroyed", err)
	}
	if err := l.EnsureRunning(ctx); !errors.Is(err, ErrNotReady) || !errors.Is(err, ErrDestroyed) {
		t.Fatalf("EnsureRunning after destroy = %v", err)
	}
}

func TestLifecycleDestroyPendingCallsNothing(t *testing.T) {
	d := &fakeDriver{}
	l, _ := NewLifecycle("p", d, Hooks{}, nil)
	if err := l.Destroy(context.Background()); err != nil || l.Status() != StatusDestroyed {
		t.Fatalf("%v %s", err, l.Status())
	}
	if d.teardowns.Load() != 0 {
		t.Fatal("destroying a pending sandbox must not call the driver")
	}
}

func TestLifecycleConcurrentStartSharesOneAttempt(t *testing.T) {
	d := &fakeDriver{acquireDelay: 30 * time.Millisecond}
	l, _ := NewLifecycle("c", d, Hooks{}, nil)
	var wg sync.WaitGroup
	outs := make([]Outcome, 8)
	for i := range outs {
		wg.Go(func() {
			var err error
			outs[i], err = l.Start(context.Background())
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := d.acquires.Load(); n != 1 {
		t.Fatalf("acquires = %d, want 1", n)
	}
	for _, o := range outs {
		if o != OutcomeCreated {
			t.Fatalf("outcomes %v: every joined start must see the shared outcome", outs)
		}
	}
}

func TestLifecycleFailedStartIsNotLatched(t *testing.T) {
	d := &fakeDriver{acquireErr: errors.New("boom")}
	l, _ := NewLifecycle("f", d, Hooks{}, nil)
	if _, err := l.Start(context.Background()); err == nil || l.Status() != StatusError {
		t.Fatalf("want error status, got %v %s", err, l.Status())
	}
	if l.Err() == nil {
		t.Fatal("Err() should report the failure")
	}
	d.acquireErr = nil
	if _, err := l.Start(context.Background()); err != nil || l.Status() != StatusRunning {
		t.Fatalf("retry: %v %s", err, l.Status())
	}
}

func TestLifecycleStartCancelledCallerDoesNotAbortSharedAttempt(t *testing.T) {
	d := &fakeDriver{acquireDelay: 50 * time.Millisecond}
	l, _ := NewLifecycle("x", d, Hooks{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := l.Start(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if out, err := l.Start(context.Background()); err != nil || out != OutcomeCreated {
		t.Fatalf("joined start: %v %v", out, err)
	}
	if d.acquires.Load() != 1 {
		t.Fatalf("acquires = %d", d.acquires.Load())
	}
}

func TestLifecycleHooks(t *testing.T) {
	var order []string
	var mu sync.Mutex
	rec := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	fail := true
	d := &fakeDriver{}
	l, _ := NewLifecycle("h", d, Hooks{
		OnStart: func(ctx context.Context, id string, o Outcome) error {
			rec("start:" + string(o))
			if fail {
				return errors.New("hook says no")
			}
			return nil
		},
		OnStop:    func(ctx context.Context, id string) error { rec("stop"); return nil },
		OnDestroy: func(ctx context.Context, id string) error { rec("destroy"); return nil },
	}, nil)
	_, err := l.Start(context.Background())
	var he *HookError
	if !errors.As(err, &he) || he.Hook != "onStart" || l.Status() != StatusError {
		t.Fatalf("start with failing hook: %v, %s", err, l.Status())
	}
	fail = false
	if _, err := l.Start(context.Background()); err != nil {
		t.Fatalf("hook must run again on the next start: %v", err)
	}
	_ = l.Stop(context.Background())
	_ = l.Destroy(context.Background())
	want := []string{"start:created", "start:connected", "stop", "destroy"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

func TestLifecycleEnvOverlay(t *testing.T) {
	if _, err := NewLifecycle("e", &fakeDriver{}, Hooks{}, map[string]string{"1BAD": "x"}); !errors.Is(err, ErrInvalidEnv) {
		t.Fatalf("invalid seed env accepted: %v", err)
	}
	seed := map[string]string{"BASE": "value", "OVERRIDE": "old"}
	l, _ := NewLifecycle("e", &fakeDriver{}, Hooks{}, seed)
	seed["BASE"] = "mutated"
	got, err := l.MergeEnv(map[string]string{"OVERRIDE": "new", "ADDED": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if got["BASE"] != "value" || got["OVERRIDE"] != "new" || got["ADDED"] != "1" {
		t.Fatalf("merged %v", got)
	}
	if _, err := l.MergeEnv(map[string]string{"BAD-NAME": "x"}); !errors.Is(err, ErrInvalidEnv) {
		t.Fatalf("per-call invalid name: %v", err)
	}
	if err := l.SetEnv(func(m map[string]string) map[string]string { m["NEW"] = "n"; return m }); err != nil {
		t.Fatal(err)
	}
	if l.Env()["NEW"] != "n" {
		t.Fatal("SetEnv not applied")
	}
	if err := l.SetEnv(func(m map[string]string) map[string]string { m["x y"] = "n"; return m }); !errors.Is(err, ErrInvalidEnv) {
		t.Fatal("SetEnv accepted invalid name")
	}
	if _, ok := l.Env()["x y"]; ok {
		t.Fatal("a rejected SetEnv must change nothing")
	}
	empty, _ := NewLifecycle("e2", &fakeDriver{}, Hooks{}, nil)
	per := map[string]string{"A": "1"}
	if got, _ := empty.MergeEnv(per); len(got) != 1 || got["A"] != "1" {
		t.Fatalf("empty overlay: %v", got)
	}
}

type failingDriver struct {
	fakeDriver
	releaseErr, teardownErr error
	releaseDelay            time.Duration
	// With gate set, Release closes releasing (once) and blocks until gate
	// is closed: the test holds the sandbox in StatusStopping.
	gate, releasing chan struct{}
}

// gated returns a failingDriver whose Release blocks until gate is closed.
func gated(releaseErr error) *failingDriver {
	return &failingDriver{releaseErr: releaseErr, gate: make(chan struct{}), releasing: make(chan struct{})}
}

func (d *failingDriver) Release(ctx context.Context) error {
	if d.releases.Add(1) == 1 && d.releasing != nil {
		close(d.releasing)
	}
	if d.gate != nil {
		<-d.gate
	}
	time.Sleep(d.releaseDelay)
	return d.releaseErr
}

// waitSpy is a context that reports when someone first waits on it (calls
// Done): a Start that blocks on an in-flight Stop does so.
type waitSpy struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWaitSpy(ctx context.Context) *waitSpy {
	return &waitSpy{Context: ctx, waiting: make(chan struct{})}
}

func (c *waitSpy) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

func (d *failingDriver) Teardown(ctx context.Context) error {
	d.teardowns.Add(1)
	return d.teardownErr
}

func TestLifecycleStopAndDestroyFailuresLeaveError(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("engine said no")
	d := &failingDriver{releaseErr: boom, teardownErr: boom}
	l, _ := NewLifecycle("f", d, Hooks{}, nil)
	if _, err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Stop(ctx); !errors.Is(err, boom) || l.Status() != StatusError || !errors.Is(l.Err(), boom) {
		t.Fatalf("failed Stop: err %v, status %s", err, l.Status())
	}
	if err := l.Destroy(ctx); !errors.Is(err, boom) || l.Status() != StatusError {
		t.Fatalf("failed Destroy: err %v, status %s", err, l.Status())
	}

	hookErr := errors.New("hook failed")
	l2, _ := NewLifecycle("h", &fakeDriver{}, Hooks{
		OnStop:    func(context.Context, string) error { return hookErr },
		OnDestroy: func(context.Context, string) error { return hookErr },
	}, nil)
	if _, err := l2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var he *HookError
	if err := l2.Stop(ctx); !errors.As(err, &he) || he.Hook != "onStop" || l2.Status() != StatusError {
		t.Fatalf("onStop failure: %v, status %s", err, l2.Status())
	}
	if err := l2.Destroy(ctx); !errors.As(err, &he) || he.Hook != "onDestroy" || l2.Status() != StatusError {
		t.Fatalf("onDestroy failure: %v, status %s", err, l2.Status())
	}
}

func TestLifecycleStartWaitsForFailingStop(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("stop failed")
	d := gated(boom)
	l, _ := NewLifecycle("w", d, Hooks{}, nil)
	if _, err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopDone := make(chan error, 1)
	go func() { stopDone <- l.Stop(ctx) }()
	<-d.releasing
	if st := l.Status(); st != StatusStopping {
		t.Fatalf("status during Release = %s, want %s", st, StatusStopping)
	}
	// Let the Stop fail only once the Start waits for it.
	spy := newWaitSpy(ctx)
	go func() {
		<-spy.waiting
		close(d.gate)
	}()
	if _, err := l.Start(spy); !errors.Is(err, boom) {
		t.Fatalf("Start during a failing Stop = %v, want the Stop's error", err)
	}
	if err := <-stopDone; !errors.Is(err, boom) {
		t.Fatalf("Stop = %v", err)
	}
}

func TestLifecycleConcurrentStopsShareOneAttempt(t *testing.T) {
	ctx := context.Background()
	d := &failingDriver{releaseDelay: 30 * time.Millisecond}
	l, _ := NewLifecycle("s", d, Hooks{}, nil)
	if _, err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if err := l.Stop(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := d.releases.Load(); n != 1 || l.Status() != StatusStopped {
		t.Fatalf("releases = %d, status %s; want one shared stop", n, l.Status())
	}
}

func TestLifecycleEnsureRunningDuringTeardown(t *testing.T) {
	ctx := context.Background()
	d := gated(nil)
	l, _ := NewLifecycle("t", d, Hooks{}, nil)
	if _, err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Stop(ctx) }()
	<-d.releasing
	// Teardown may still run commands: EnsureRunning must not restart or fail.
	if err := l.EnsureRunning(ctx); err != nil {
		t.Fatalf("EnsureRunning while stopping: %v", err)
	}
	close(d.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d.acquires.Load() != 1 {
		t.Fatalf("EnsureRunning during stop acquired again")
	}
}

func TestLifecycleStopPendingStopsTheEngine(t *testing.T) {
	d := &fakeDriver{}
	l, _ := NewLifecycle("p", d, Hooks{}, nil)
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d.releases.Load() != 1 || l.Status() != StatusStopped {
		t.Fatalf("Stop on pending: releases %d, status %s; want the engine's stop and status stopped", d.releases.Load(), l.Status())
	}
}
