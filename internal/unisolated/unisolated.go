// Package unisolated is a TEST HARNESS engine. IT PROVIDES NO ISOLATION
// WHATSOEVER: commands run directly on the host, as the user running the
// tests, with the host's filesystem, network, processes and environment.
// Never use it to run code you do not trust, and never offer it to users.
//
// It exists so that the toolbox stack (the toolbox/daemon server, the
// toolbox client and the toolbox/process manager) can be tested end to end
// through the [sandbox.Sandbox] contract, including the sandboxtest
// conformance suite, on any machine and without privileges. The daemon runs
// in the test process, serving HTTP on a unix socket in a private temporary
// folder; the sandbox talks to it exactly as the real engines talk to
// theirs.
package unisolated

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
	"github.com/agentbox-dev/agentbox/toolbox/process"
)

// Name and Provider of every unisolated sandbox.
const (
	Name     = "UnisolatedSandbox"
	Provider = "unisolated"
)

// Options configures a Sandbox. The zero value is usable.
type Options struct {
	// ID names the sandbox; default a random id.
	ID string
	// TempDir is the parent of the sandbox's private folder (socket and
	// work dir); default os.TempDir(). Keep it short: unix socket paths are
	// limited to about 100 bytes.
	TempDir string
	// Env seeds the runtime environment overlay.
	Env map[string]string
	// Hooks run around lifecycle transitions.
	Hooks sandbox.Hooks
	// DefaultTimeout applies to commands that set none; 0 means
	// sandbox.DefaultTimeout.
	DefaultTimeout time.Duration
	// WrapHandler, when set, wraps the daemon's handler, e.g. with
	// spectest's validating middleware.
	WrapHandler func(http.Handler) http.Handler
	// WrapTransport, when set, wraps the client's transport, e.g. with
	// spectest's validating RoundTripper.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// DisableWebSocket makes the client follow logs by polling.
	DisableWebSocket bool
}

// Sandbox is an unisolated sandbox: see the package documentation. Its
// lifecycle (Start, Stop, Destroy, Status, the environment overlay) comes
// from the embedded *sandbox.Lifecycle.
type Sandbox struct {
	*sandbox.Lifecycle

	opts      Options
	createdAt time.Time
	transport *http.Transport
	client    *toolbox.Client
	procs     *process.Manager
	parent    *Sandbox // for a handle made by Reopen: the sandbox running the daemon

	// pathMu guards the paths, set once by the first Acquire. It is apart
	// from mu because dialling the socket must not wait for a transition.
	pathMu  sync.Mutex
	dir     string // private folder: socket and work dir
	workDir string
	socket  string

	mu     sync.Mutex // guards the running daemon and server
	daemon *daemon.Server
	server *http.Server
	served chan struct{} // closed when server.Serve returns
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New returns a sandbox in status pending. Nothing is created on disk and
// nothing runs until Start or the first command; Destroy removes it all.
func New(opts Options) (*Sandbox, error) {
	if opts.ID == "" {
		var b [6]byte
		rand.Read(b[:])
		opts.ID = "unisolated-" + hex.EncodeToString(b[:])
	}
	return newSandbox(opts, nil)
}

// Reopen returns another handle on s, as a second process would open one:
// it has a toolbox client and a process manager of its own and shares
// nothing with s but the daemon s runs, so the background processes of
// either are reached through the other (see sandbox.ProcessManager). It
// takes s's options without the hooks. Its Start starts s (and reports s's
// outcome); its Stop and Destroy stop and destroy s. Release it with Close
// or Detach; nothing runs on its own behalf otherwise.
func (s *Sandbox) Reopen() (*Sandbox, error) {
	opts := s.opts
	opts.Hooks = sandbox.Hooks{}
	return newSandbox(opts, s)
}

func newSandbox(opts Options, parent *Sandbox) (*Sandbox, error) {
	s := &Sandbox{opts: opts, createdAt: time.Now(), parent: parent}
	if parent != nil {
		s.createdAt = parent.createdAt
	}
	lc, err := sandbox.NewLifecycle(opts.ID, (*driver)(s), opts.Hooks, opts.Env)
	if err != nil {
		return nil, err
	}
	s.Lifecycle = lc

	s.transport = http.DefaultTransport.(*http.Transport).Clone()
	s.transport.Proxy = nil
	s.transport.MaxIdleConnsPerHost = 32
	s.transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		socket := s.socketPath()
		if socket == "" {
			return nil, fmt.Errorf("unisolated: sandbox %s was never started: %w", s.ID(), sandbox.ErrNotReady)
		}
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	var rt http.RoundTripper = s.transport
	if opts.WrapTransport != nil {
		rt = opts.WrapTransport(rt)
	}
	s.client, err = toolbox.NewClient(toolbox.ClientOptions{
		BaseURL:          "http://unisolated",
		HTTPClient:       &http.Client{Transport: rt},
		DisableWebSocket: opts.DisableWebSocket,
	})
	if err != nil {
		return nil, fmt.Errorf("unisolated: %w", err)
	}
	s.procs = process.NewManager(process.Options{
		Client:         s.client,
		Host:           s.Lifecycle,
		DefaultTimeout: opts.DefaultTimeout,
	})
	return s, nil
}

// Name returns "UnisolatedSandbox".
func (s *Sandbox) Name() string { return Name }

// Provider returns "unisolated".
func (s *Sandbox) Provider() string { return Provider }

// Dir returns the sandbox's private folder on the host; empty before the
// first start.
func (s *Sandbox) Dir() string {
	if s.parent != nil {
		return s.parent.Dir()
	}
	s.pathMu.Lock()
	defer s.pathMu.Unlock()
	return s.dir
}

// WorkDir returns the default working directory of commands; empty before
// the first start.
func (s *Sandbox) WorkDir() string {
	if s.parent != nil {
		return s.parent.WorkDir()
	}
	s.pathMu.Lock()
	defer s.pathMu.Unlock()
	return s.workDir
}

// Close releases this handle: its process manager's Close, which kills the
// background processes spawned through it, and its idle connections. The
// sandbox keeps running until Stop or Destroy, and the handle stays
// usable.
func (s *Sandbox) Close(ctx context.Context) error {
	err := s.procs.Close(ctx)
	s.transport.CloseIdleConnections()
	return err
}

// Detach releases this handle as Close does, but leaves every background
// process running, for other handles to reattach to (the process
// manager's Detach).
func (s *Sandbox) Detach(ctx context.Context) error {
	err := s.procs.Detach(ctx)
	s.transport.CloseIdleConnections()
	return err
}

// Client returns the toolbox client talking to the sandbox's daemon.
func (s *Sandbox) Client() *toolbox.Client { return s.client }

// ExecuteCommand runs command with args quoted, starting the sandbox if
// needed. See sandbox.Sandbox.
func (s *Sandbox) ExecuteCommand(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	return s.procs.Execute(ctx, command, args, opts)
}

// Processes returns the manager of background processes.
func (s *Sandbox) Processes() sandbox.ProcessManager { return s.procs }

// Info describes the sandbox.
func (s *Sandbox) Info(ctx context.Context) (*sandbox.Info, error) {
	return &sandbox.Info{
		ID:        s.ID(),
		Name:      Name,
		Provider:  Provider,
		Status:    s.Status(),
		CreatedAt: s.createdAt,
		Metadata:  map[string]string{"dir": s.Dir(), "workDir": s.WorkDir(), "isolation": "none"},
	}, nil
}

// Instructions tells an agent the truth: there is no isolation.
func (s *Sandbox) Instructions() string {
	return "Commands run directly on the host without any isolation (a test harness), " +
		"as the current user, in a temporary working directory on the host."
}

func (s *Sandbox) socketPath() string {
	if s.parent != nil {
		return s.parent.socketPath()
	}
	s.pathMu.Lock()
	defer s.pathMu.Unlock()
	return s.socket
}

// driver is the sandbox.Driver of a Sandbox.
type driver Sandbox

// Acquire starts the daemon and serves it on the socket; a handle made by
// Reopen starts its parent instead.
func (d *driver) Acquire(ctx context.Context) (sandbox.Outcome, error) {
	s := (*Sandbox)(d)
	if s.parent != nil {
		outcome, err := s.parent.Start(ctx)
		s.procs.Reset()
		return outcome, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.server != nil {
		return sandbox.OutcomeConnected, nil
	}
	outcome := sandbox.OutcomeConnected // a restart of the same folder
	if s.Dir() == "" {
		outcome = sandbox.OutcomeCreated
		dir, err := os.MkdirTemp(s.opts.TempDir, "agentbox-unisolated-")
		if err != nil {
			return "", fmt.Errorf("unisolated: creating the sandbox folder: %w", err)
		}
		socket := filepath.Join(dir, "toolbox.sock")
		if len(socket) > 100 {
			os.RemoveAll(dir)
			return "", fmt.Errorf("unisolated: socket path %q is too long for a unix socket; set Options.TempDir to a shorter folder: %w", socket, sandbox.ErrInvalidArgument)
		}
		work := filepath.Join(dir, "work")
		if err := os.Mkdir(work, 0o755); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("unisolated: %w", err)
		}
		s.pathMu.Lock()
		s.dir, s.workDir, s.socket = dir, work, socket
		s.pathMu.Unlock()
	}
	srv, err := daemon.New(daemon.Options{WorkDir: s.WorkDir()})
	if err != nil {
		return "", fmt.Errorf("unisolated: starting the toolbox daemon: %w", err)
	}
	socket := s.socketPath()
	os.Remove(socket) // a stale socket of a previous start
	ln, err := net.Listen("unix", socket)
	if err != nil {
		srv.Close()
		return "", fmt.Errorf("unisolated: %w", err)
	}
	var h http.Handler = srv
	if s.opts.WrapHandler != nil {
		h = s.opts.WrapHandler(h)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(ln)
	}()
	s.daemon, s.server, s.served = srv, hs, served
	s.procs.Reset()
	return outcome, nil
}

// Release ends every process and stops serving; files stay. A handle made
// by Reopen closes its process manager and stops its parent.
func (d *driver) Release(ctx context.Context) error {
	s := (*Sandbox)(d)
	if s.parent != nil {
		return errors.Join(s.Close(ctx), s.parent.Stop(ctx))
	}
	return s.shutdown(ctx)
}

// Teardown stops everything and removes the sandbox's folder. A handle
// made by Reopen closes its process manager and destroys its parent.
func (d *driver) Teardown(ctx context.Context) error {
	s := (*Sandbox)(d)
	if s.parent != nil {
		err := errors.Join(s.Close(ctx), s.parent.Destroy(ctx))
		s.client.Close()
		return err
	}
	err := s.shutdown(ctx)
	s.client.Close()
	s.transport.CloseIdleConnections()
	if dir := s.Dir(); dir != "" {
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("unisolated: removing %s: %w", dir, rerr))
		}
	}
	return err
}

func (s *Sandbox) shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.server != nil {
		// Kill tracked processes the polite way first, while the daemon
		// still answers; the daemon's Close then ends whatever is left.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := s.procs.Close(cctx); err != nil {
			errs = append(errs, fmt.Errorf("unisolated: closing the process manager: %w", err))
		}
		cancel()
		if err := s.daemon.Close(); err != nil {
			errs = append(errs, fmt.Errorf("unisolated: closing the daemon: %w", err))
		}
		// The daemon's Close ended every command and follower, so the
		// requests in flight finish at once; wait for their handlers (a
		// test's validating middleware must not report after the test),
		// then drop what is left.
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		_ = s.server.Shutdown(sctx)
		scancel()
		if err := s.server.Close(); err != nil {
			errs = append(errs, fmt.Errorf("unisolated: closing the server: %w", err))
		}
		<-s.served
		s.daemon, s.server, s.served = nil, nil, nil
		os.Remove(s.socketPath())
	}
	s.procs.Reset()
	s.transport.CloseIdleConnections()
	return errors.Join(errs...)
}
