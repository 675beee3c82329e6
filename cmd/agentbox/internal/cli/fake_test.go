package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/unisolated"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// fakeEngine is an Engine whose sandboxes are unisolated test sandboxes
// (internal/unisolated: the real toolbox daemon, client and process
// manager, with commands run on the host WITHOUT ANY ISOLATION). Each
// sandbox's daemon runs in the test process, shared by every Run of a test
// the way the local engine's sandboxes are shared through the state dir,
// and every Open returns a new handle on it with a process manager of its
// own, as a new agentbox process would get.
type fakeEngine struct {
	t          testing.TB
	defaultDir string

	mu         sync.Mutex
	sandboxes  map[string]*fakeState // by stateDir + "\x00" + id
	opened     []OpenOptions
	openErr    error // Open fails with it when set
	listErr    error // List fails with it when set
	checkErr   error // CheckStateDir fails with it when set
	networkErr error // UpdateNetworkSettings fails with it when set
	open       int   // handles not yet detached
}

// fakeState is a sandbox of the engine.
type fakeState struct {
	info sandbox.Info // its description, but for the status
	sb   *unisolated.Sandbox
}

func newFakeEngine(t testing.TB) *fakeEngine {
	e := &fakeEngine{t: t, defaultDir: t.TempDir(), sandboxes: map[string]*fakeState{}}
	t.Cleanup(func() {
		e.mu.Lock()
		all := e.sandboxes
		e.sandboxes = nil
		open := e.open
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, st := range all {
			if err := st.sb.Destroy(ctx); err != nil {
				t.Errorf("destroy sandbox %s: %v", st.info.ID, err)
			}
		}
		if open != 0 {
			t.Errorf("%d sandbox handles were not detached", open)
		}
	})
	return e
}

func key(stateDir, id string) string { return stateDir + "\x00" + id }

func (e *fakeEngine) DefaultStateDir() (string, error) { return e.defaultDir, nil }

func (e *fakeEngine) DefaultStateDirHelp() string { return "the fake's" }

func (e *fakeEngine) CheckStateDir(string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.checkErr
}

// Open returns a new handle on the sandbox, which it makes (pending, so
// that nothing exists until the handle starts it) when there is none.
func (e *fakeEngine) Open(_ context.Context, opts OpenOptions) (Box, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.openErr != nil {
		return nil, e.openErr
	}
	e.opened = append(e.opened, opts)
	st, ok := e.sandboxes[key(opts.StateDir, opts.ID)]
	if !ok {
		sb, err := unisolated.New(unisolated.Options{ID: opts.ID})
		if err != nil {
			return nil, err
		}
		now := time.Now()
		network := sandbox.NetworkPublic
		if opts.Network.Mode == sandbox.NetworkBlocked {
			network = sandbox.NetworkBlocked
		}
		st = &fakeState{
			info: sandbox.Info{
				ID: opts.ID, Name: opts.ID, Provider: "fake", CreatedAt: now, LastUsedAt: now, Metadata: map[string]string{"k": "v"},
				Identity: &sandbox.Identity{User: "agent", Home: "/home/agent", HostUID: 100000, HostUIDCount: 65536, Capabilities: "none"},
				Network:  &sandbox.NetworkInfo{Mode: network},
				Limits:   &sandbox.Limits{Note: "none in the fake"},
			},
			sb: sb,
		}
		e.sandboxes[key(opts.StateDir, opts.ID)] = st
	}
	h, err := st.sb.Reopen()
	if err != nil {
		return nil, err
	}
	e.open++
	return &fakeBox{Sandbox: h, e: e}, nil
}

// lookup returns the sandbox id of stateDir, or nil when there is none
// (or it was never started).
func (e *fakeEngine) lookup(stateDir, id string) *fakeState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.sandboxes[key(stateDir, id)]
	if st == nil || st.sb.Status() == sandbox.StatusPending {
		return nil
	}
	return st
}

func (e *fakeEngine) List(_ context.Context, stateDir string) ([]sandbox.Info, error) {
	e.mu.Lock()
	err := e.listErr
	var ids []string
	for k := range e.sandboxes {
		if id, ok := strings.CutPrefix(k, stateDir+"\x00"); ok {
			ids = append(ids, id)
		}
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []sandbox.Info
	for _, id := range ids {
		if st := e.state(stateDir, id); st != nil {
			out = append(out, st.info)
		}
	}
	return out, nil
}

func (e *fakeEngine) info(stateDir, id string) (*sandbox.Info, error) {
	st := e.state(stateDir, id)
	if st == nil {
		return nil, fmt.Errorf("fake: sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	return &st.info, nil
}

func (e *fakeEngine) remove(ctx context.Context, stateDir, id string) error {
	st := e.lookup(stateDir, id)
	if st == nil {
		return fmt.Errorf("fake: sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	e.mu.Lock()
	delete(e.sandboxes, key(stateDir, id))
	e.mu.Unlock()
	return st.sb.Destroy(ctx)
}

func (e *fakeEngine) stop(ctx context.Context, stateDir, id string) error {
	st := e.lookup(stateDir, id)
	if st == nil {
		return fmt.Errorf("fake: sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	return st.sb.Stop(ctx)
}

func (e *fakeEngine) updateNetwork(stateDir, id string, p sandbox.NetworkPolicy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.locked(stateDir, id)
	if err != nil {
		return err
	}
	if e.networkErr != nil {
		return e.networkErr
	}
	n := p.Info()
	n.Ports = st.info.Network.Ports
	st.info.Network = n
	return nil
}

func (e *fakeEngine) publishPort(stateDir, id string, hostPort, sandboxPort int) (sandbox.PublishedPort, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.locked(stateDir, id)
	if err != nil {
		return sandbox.PublishedPort{}, err
	}
	if hostPort == 0 {
		hostPort = 40000 + len(st.info.Network.Ports)
	}
	p := sandbox.PublishedPort{HostAddress: "127.0.0.1", HostPort: hostPort, SandboxPort: sandboxPort}
	st.info.Network.Ports = append(st.info.Network.Ports, p)
	return p, nil
}

func (e *fakeEngine) unpublishPort(stateDir, id string, hostPort int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.locked(stateDir, id)
	if err != nil {
		return err
	}
	for i, p := range st.info.Network.Ports {
		if p.HostPort == hostPort {
			st.info.Network.Ports = append(st.info.Network.Ports[:i:i], st.info.Network.Ports[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("fake: port %d: %w", hostPort, sandbox.ErrNotFound)
}

// Find returns a handle of the sandbox id of stateDir, made by an Open
// (started or not).
func (e *fakeEngine) Find(_ context.Context, stateDir, id string) (Handle, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.locked(stateDir, id); err != nil {
		return nil, err
	}
	return &fakeHandle{e: e, stateDir: stateDir, id: id}, nil
}

// fakeHandle is a Handle of the fake: each method finds its sandbox
// anew, as a local handle reads the state dir at each operation.
type fakeHandle struct {
	e            *fakeEngine
	stateDir, id string
}

func (h *fakeHandle) Info(context.Context) (*sandbox.Info, error) { return h.e.info(h.stateDir, h.id) }

func (h *fakeHandle) Stop(ctx context.Context) error { return h.e.stop(ctx, h.stateDir, h.id) }

func (h *fakeHandle) Destroy(ctx context.Context) error { return h.e.remove(ctx, h.stateDir, h.id) }

func (h *fakeHandle) UpdateNetworkSettings(_ context.Context, p sandbox.NetworkPolicy) error {
	return h.e.updateNetwork(h.stateDir, h.id, p)
}

func (h *fakeHandle) PublishPort(_ context.Context, hostPort, sandboxPort int) (sandbox.PublishedPort, error) {
	return h.e.publishPort(h.stateDir, h.id, hostPort, sandboxPort)
}

func (h *fakeHandle) UnpublishPort(_ context.Context, hostPort int) error {
	return h.e.unpublishPort(h.stateDir, h.id, hostPort)
}

// locked returns the sandbox id of stateDir, e.mu held.
func (e *fakeEngine) locked(stateDir, id string) (*fakeState, error) {
	if st := e.sandboxes[key(stateDir, id)]; st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("fake: sandbox %s: %w", id, sandbox.ErrNotFound)
}

// state describes a sandbox with its current status, or returns nil.
func (e *fakeEngine) state(stateDir, id string) *fakeState {
	st := e.lookup(stateDir, id)
	if st == nil {
		return nil
	}
	c := *st
	c.info.Status = st.sb.Status()
	return &c
}

// fakeBox is an opened fake sandbox: a handle of its own on the sandbox.
type fakeBox struct {
	*unisolated.Sandbox
	e        *fakeEngine
	detached bool
}

func (b *fakeBox) Detach(ctx context.Context) error {
	b.e.mu.Lock()
	if b.detached {
		b.e.t.Errorf("sandbox handle %q detached twice", b.ID())
	}
	b.detached = true
	b.e.open--
	b.e.mu.Unlock()
	return b.Sandbox.Detach(ctx)
}

// waitExit waits until background process pid of the default sandbox has
// exited, through a handle of its own.
func (e *fakeEngine) waitExit(t *testing.T, pid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	box, err := e.Open(ctx, OpenOptions{StateDir: e.defaultDir, ID: DefaultID})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Detach(context.Background())
	p, err := box.Processes().Attach(ctx, pid, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("wait for process %s: %v", pid, err)
	}
}
