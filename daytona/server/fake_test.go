package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// fakeEngine runs each sandbox as a toolbox server (package
// toolbox/daemon) of the test process on a unix socket: fast, and without
// the root the local engine needs for its defaults. Operations can be held
// (block) to look at transitional states, and sandboxes stopped or removed
// behind the server's back.
type fakeEngine struct {
	t   testing.TB
	dir string // sockets and work dirs

	mu      sync.Mutex
	boxes   map[string]*fakeBox
	blocked map[string]chan struct{} // operation → closed to release it
	calls   map[string]int           // operation → times called
	ports   map[int]string           // a sandbox port → the host address serving it
	n       int
	// secrets are each sandbox's secrets as setSecrets last gave them
	// (secret_test.go).
	secrets map[string][]sandbox.Secret
}

type fakeBox struct {
	spec     spec
	work     string
	sock     string
	env      map[string]string
	network  sandbox.NetworkPolicy
	lastUsed time.Time
	paused   bool         // fake_lifecycle_test.go
	srv      *http.Server // nil when stopped
	daemon   *daemon.Server
	served   chan struct{}
}

func newFakeEngine(t testing.TB) *fakeEngine {
	// A short folder: socket paths must fit in an address.
	dir, err := os.MkdirTemp("", "serve")
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEngine{t: t, dir: dir, boxes: map[string]*fakeBox{}, blocked: map[string]chan struct{}{}, calls: map[string]int{}, ports: map[int]string{}}
	t.Cleanup(func() {
		e.mu.Lock()
		for _, ch := range e.blocked {
			close(ch)
		}
		e.blocked = map[string]chan struct{}{}
		e.mu.Unlock()
	})
	// After the server's Close (registered later, so run earlier).
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, b := range e.boxes {
			b.halt()
		}
		os.RemoveAll(dir)
	})
	return e
}

// block holds every later call of operation op until release is called.
func (e *fakeEngine) block(op string) (release func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := make(chan struct{})
	e.blocked[op] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			if e.blocked[op] == ch {
				delete(e.blocked, op)
			}
			e.mu.Unlock()
			close(ch)
		})
	}
}

// enter counts a call of op and waits while op is blocked.
func (e *fakeEngine) enter(ctx context.Context, op string) error {
	e.mu.Lock()
	e.calls[op]++
	ch := e.blocked[op]
	e.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *fakeEngine) called(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[op]
}

func (e *fakeEngine) box(id string) (*fakeBox, error) {
	b := e.boxes[id]
	if b == nil {
		return nil, fmt.Errorf("fake sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	return b, nil
}

func (e *fakeEngine) create(id string, sp spec) (func(context.Context) (sizes, error), error) {
	if sp.resources.CPUCores > 64 {
		return nil, fmt.Errorf("cpu %g: more than the host has: %w", sp.resources.CPUCores, sandbox.ErrInvalidArgument)
	}
	return func(ctx context.Context) (sizes, error) {
		if err := e.enter(ctx, "create"); err != nil {
			return sizes{}, err
		}
		e.mu.Lock()
		e.n++
		n := e.n
		e.mu.Unlock()
		// Made without e.mu held: sandboxes are created concurrently.
		b := &fakeBox{spec: sp, work: filepath.Join(e.dir, strconv.Itoa(n)), sock: filepath.Join(e.dir, strconv.Itoa(n)+".sock"), network: sp.network}
		if err := os.Mkdir(b.work, 0o700); err != nil {
			return sizes{}, err
		}
		err := b.run(sp.env)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.boxes[id] = b
		return sizes{cpu: 2, memoryGiB: 4, diskGiB: 8}, err
	}, nil
}

// run starts b's toolbox server with env.
func (b *fakeBox) run(env map[string]string) error {
	vars := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + b.work}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	d, err := daemon.New(daemon.Options{WorkDir: b.work, Env: vars, Daytona: b.spec.daytonaToolbox})
	if err != nil {
		return err
	}
	os.Remove(b.sock)
	ln, err := net.Listen("unix", b.sock)
	if err != nil {
		d.Close()
		return err
	}
	b.env, b.daemon, b.served = env, d, make(chan struct{})
	b.srv = &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(b.srv, b.served)
	return nil
}

// halt stops b's toolbox server.
func (b *fakeBox) halt() {
	if b.srv == nil {
		return
	}
	_ = b.srv.Close()
	<-b.served
	_ = b.daemon.Close()
	b.srv, b.daemon = nil, nil
}

// op runs operation name on sandbox id: it waits while the operation is
// blocked, then runs fn with e.mu held.
func (e *fakeEngine) op(ctx context.Context, name, id string, fn func(b *fakeBox) error) error {
	if err := e.enter(ctx, name); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		return err
	}
	return fn(b)
}

func (e *fakeEngine) start(ctx context.Context, id string, env map[string]string) error {
	return e.op(ctx, "start", id, func(b *fakeBox) error {
		b.paused = false // start resumes
		if b.srv != nil {
			return nil
		}
		return b.run(env)
	})
}

func (e *fakeEngine) stop(ctx context.Context, id string) error {
	return e.op(ctx, "stop", id, func(b *fakeBox) error {
		b.halt()
		return nil
	})
}

func (e *fakeEngine) remove(ctx context.Context, id string) error {
	if err := e.enter(ctx, "remove"); err != nil {
		return err
	}
	e.mu.Lock()
	b, err := e.box(id)
	if err == nil {
		delete(e.boxes, id)
	}
	e.mu.Unlock()
	if err != nil {
		return err
	}
	// Halted without e.mu held: sandboxes are removed concurrently, and
	// b is no one else's now.
	b.halt()
	return os.RemoveAll(b.work)
}

func (e *fakeEngine) status(_ context.Context, id string) (engineStatus, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		return engineStatus{}, err
	}
	return engineStatus{running: b.srv != nil && !b.paused, paused: b.paused && b.srv != nil, lastUsed: b.lastUsed}, nil
}

func (e *fakeEngine) setNetwork(_ context.Context, id string, n sandbox.NetworkPolicy) error {
	if err := n.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		return err
	}
	b.network = n
	return nil
}

func (e *fakeEngine) dial(ctx context.Context, id string) (net.Conn, error) {
	e.mu.Lock()
	b, err := e.box(id)
	if err == nil && b.paused {
		err = fmt.Errorf("fake sandbox %s is paused: resume it first", id)
	}
	if err == nil {
		b.lastUsed = time.Now()
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", b.sock)
}

// behindBack stops (or, with remove, deletes) sandbox id without the
// server knowing.
func (e *fakeEngine) behindBack(id string, remove bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		e.t.Fatal(err)
	}
	b.halt()
	if remove {
		delete(e.boxes, id)
	}
}

// networkOf returns the engine's network policy of sandbox id.
func (e *fakeEngine) networkOf(id string) sandbox.NetworkPolicy {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b.network
}

func (e *fakeEngine) dialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	e.mu.Lock()
	e.calls["dialPort"]++
	_, err := e.box(id)
	addr := e.ports[port]
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if addr == "" {
		return nil, fmt.Errorf("fake sandbox %s: nothing on port %d", id, port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// serveOn makes h what every sandbox serves on port.
func (e *fakeEngine) serveOn(port int, h http.Handler) {
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	e.mu.Lock()
	e.ports[port] = srv.Listener.Addr().String()
	e.mu.Unlock()
}

func (e *fakeEngine) removeVolume(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls["removeVolume "+name]++
	return nil
}

// mounts returns the volumes (engine names) and mount paths of sandbox id.
func (e *fakeEngine) mounts(id string) []volume {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b.spec.volumes
}

// hasImage knows no image: the fake engine has only the default root.
func (e *fakeEngine) hasImage(context.Context, string) (bool, error) { return false, nil }
