package daytona

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/process"
)

// Sandbox is a sandbox run by Daytona (or any server of its API, such as
// agentbox serve): the control plane creates, finds, starts, stops and
// deletes it; commands, processes and files go through its toolbox with
// the same toolbox.Client and toolbox/process code as the local engine.
// It implements sandbox.Sandbox. Create it with New; the first command, or
// Start, starts it.
type Sandbox struct {
	*sandbox.Lifecycle
	opts  Options
	api   *Client
	owned bool // api was made by New: Close closes it
	tb    *toolbox.Client
	route *route
	mgr   *process.Manager
	// mounts are the bucket mounts (mount.go).
	mounts mountTable

	// mu guards the fields below and the network fields of opts
	// (UpdateNetworkSettings).
	mu       sync.Mutex
	remote   *SandboxDTO // the attached sandbox, nil when none
	remoteID string      // its Daytona id, kept across a stop
	created  time.Time   // its creation (Daytona's) or the first start
	workDir  string      // Options.WorkingDirectory, else the sandbox's own
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New returns a pending Daytona sandbox configured by opts. It only
// validates (and makes the control-plane client, which needs credentials:
// see Config); the sandbox is found or created on Start or the first
// command.
func New(opts Options) (*Sandbox, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	s := &Sandbox{opts: o, api: o.Client, workDir: o.WorkingDirectory}
	if s.api == nil {
		if s.api, err = NewClient(Config{APIKey: o.APIKey, APIURL: o.APIURL, Target: o.Target}); err != nil {
			return nil, err
		}
		s.owned = true
	}
	// Every start ends by restoring the bucket mounts (mount.go), after
	// the user's OnStart hook; their failures are in their states.
	hooks, onStart := o.Hooks, o.Hooks.OnStart
	hooks.OnStart = func(ctx context.Context, id string, out sandbox.Outcome) error {
		if onStart != nil {
			if err := onStart(ctx, id, out); err != nil {
				return err
			}
		}
		s.restoreMounts(ctx)
		return nil
	}
	// A stop ends the mounts' FUSE servers (pending until the next start);
	// a destroy ends the mounts.
	onStop, onDestroy := o.Hooks.OnStop, o.Hooks.OnDestroy
	hooks.OnStop = func(ctx context.Context, id string) error {
		if onStop != nil {
			if err := onStop(ctx, id); err != nil {
				return err
			}
		}
		s.mounts.stopped()
		return nil
	}
	hooks.OnDestroy = func(ctx context.Context, id string) error {
		if onDestroy != nil {
			if err := onDestroy(ctx, id); err != nil {
				return err
			}
		}
		s.mounts.clear()
		return nil
	}
	if s.Lifecycle, err = sandbox.NewLifecycle(o.ID, driver{s}, hooks, o.Env); err != nil {
		return nil, err
	}
	s.route = &route{next: newToolboxTransport(), id: o.ID}
	s.tb, err = toolbox.NewClient(toolbox.ClientOptions{
		BaseURL:    "http://" + routeHost,
		Token:      s.api.Token(),
		HTTPClient: &http.Client{Transport: s.route},
	})
	if err != nil {
		return nil, err
	}
	s.mgr = process.NewManager(process.Options{
		Client: s.tb, Host: s.Lifecycle, DefaultTimeout: o.Timeout, DefaultCwd: o.WorkingDirectory,
		// Every handle of this sandbox, in any process, sees the same
		// background processes (they live in named sessions).
		SessionPrefix: "agentbox-",
	})
	return s, nil
}

// newToolboxTransport returns the transport of toolbox requests.
func newToolboxTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	return t
}

// Name returns "DaytonaSandbox".
func (s *Sandbox) Name() string { return "DaytonaSandbox" }

// Provider returns "daytona".
func (s *Sandbox) Provider() string { return "daytona" }

// Client returns the toolbox client of the sandbox: files, git, sessions
// and the rest of the toolbox API. Its calls fail with an error matching
// sandbox.ErrNotReady until the sandbox is started.
func (s *Sandbox) Client() *toolbox.Client { return s.tb }

// Instance returns the toolbox client of the started sandbox, or an error
// matching sandbox.ErrNotReady before it is.
func (s *Sandbox) Instance() (*toolbox.Client, error) {
	if s.attached() == nil {
		return nil, &sandbox.NotReadyError{ID: s.opts.ID}
	}
	return s.tb, nil
}

// API returns the control-plane client.
func (s *Sandbox) API() *Client { return s.api }

// RemoteID returns the Daytona id of the sandbox, "" before it was found
// or created.
func (s *Sandbox) RemoteID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remoteID
}

// attached returns the attached sandbox, or nil.
func (s *Sandbox) attached() *SandboxDTO {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remote
}

// Processes returns the manager of background processes.
func (s *Sandbox) Processes() sandbox.ProcessManager { return processes{s.mgr, s} }

// ExecuteCommand runs command (args quoted with sandbox.ShellQuote) in the
// sandbox, starting it first if needed. When the command cannot start
// because the sandbox turns out dead (stopped by its auto-stop interval,
// deleted behind this handle's back), it restarts or recreates the
// sandbox and runs the command once more; a second failure is returned.
func (s *Sandbox) ExecuteCommand(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	res, err := s.mgr.Execute(ctx, command, args, opts)
	if err != nil && s.revive(ctx, err) {
		return s.mgr.Execute(ctx, command, args, opts)
	}
	return res, err
}

// processes is the sandbox's process manager, whose Spawn retries once on
// a dead sandbox as ExecuteCommand does.
type processes struct {
	*process.Manager
	s *Sandbox
}

// Spawn starts command in the background (see sandbox.ProcessManager).
func (p processes) Spawn(ctx context.Context, command string, opts *sandbox.ExecOptions) (sandbox.Process, error) {
	proc, err := p.Manager.Spawn(ctx, command, opts)
	if err != nil && p.s.revive(ctx, err) {
		return p.Manager.Spawn(ctx, command, opts)
	}
	return proc, err
}

// deadPattern matches the messages by which Daytona says a sandbox is not
// running (Mastra's list).
var deadPattern = regexp.MustCompile(`(?i)sandbox is not running|sandbox already destroyed|sandbox.*not found|failed to resolve container ip|is the sandbox started`)

// revive reports whether err, the failure of a command's start on the
// running sandbox, came from the sandbox being dead, and if so marks it
// stopped so that the next command starts it again (found stopped: start;
// gone: create anew). Validation errors and a cancelled ctx are not.
func (s *Sandbox) revive(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, sandbox.ErrInvalidArgument) || errors.Is(err, sandbox.ErrInvalidEnv) || s.Status() != sandbox.StatusRunning {
		return false
	}
	if !deadPattern.MatchString(err.Error()) && !s.remoteDead(ctx, err) {
		return false
	}
	s.detach()
	s.SetStatus(sandbox.StatusStopped)
	return true
}

// remoteDead reports whether err is a toolbox failure the sandbox's own
// state explains: the control plane no longer has it started.
func (s *Sandbox) remoteDead(ctx context.Context, err error) bool {
	var te *toolbox.APIError
	if errors.As(err, &te) && te.StatusCode < 500 && te.StatusCode != http.StatusBadRequest && te.StatusCode != http.StatusNotFound && te.StatusCode != http.StatusConflict && te.StatusCode != http.StatusGone {
		return false
	}
	id := s.RemoteID()
	if id == "" {
		return false
	}
	sb, gerr := s.api.GetSandbox(ctx, id)
	return errors.Is(gerr, ErrNotFound) || gerr == nil && sb.State != StateStarted
}

// attach makes sb the sandbox's remote sandbox.
func (s *Sandbox) attach(ctx context.Context, sb *SandboxDTO) error {
	if err := s.route.set(sb); err != nil {
		return err
	}
	s.mu.Lock()
	s.remote, s.remoteID = sb, sb.ID
	if s.created = sb.Created(); s.created.IsZero() {
		s.created = time.Now()
	}
	probe := s.opts.WorkingDirectory == ""
	s.mu.Unlock()
	if probe {
		// Best effort, as Mastra's pwd probe: Instructions names it.
		if wd, err := s.tb.WorkDir(ctx); err == nil && wd != "" {
			s.mu.Lock()
			s.workDir = wd
			s.mu.Unlock()
		}
	}
	// A session ready for the first command, which then costs one request
	// (a round trip to the cloud) instead of two.
	s.mgr.Warm(ctx)
	return nil
}

// detach forgets the attached sandbox (keeping its id for the next start).
func (s *Sandbox) detach() {
	_ = s.route.set(nil)
	s.mu.Lock()
	s.remote = nil
	s.mu.Unlock()
}

// Info describes the sandbox, as Mastra's getInfo does: resources only
// while attached (memory and disk in MB: Daytona's GiB × 1024). Network
// is the policy of its Options (or the last UpdateNetworkSettings).
func (s *Sandbox) Info(ctx context.Context) (*sandbox.Info, error) {
	s.mu.Lock()
	remote, created, network := s.remote, s.created, s.opts.Network
	s.mu.Unlock()
	if created.IsZero() {
		created = time.Now()
	}
	info := &sandbox.Info{
		ID: s.opts.ID, Name: s.Name(), Provider: s.Provider(), Status: s.Status(), CreatedAt: created,
		Metadata: map[string]string{"language": s.opts.Language, "ephemeral": strconv.FormatBool(s.opts.Ephemeral)},
	}
	if s.opts.Snapshot != "" {
		info.Metadata["snapshot"] = s.opts.Snapshot
	}
	if s.opts.Image != "" {
		info.Metadata["image"] = s.opts.Image
	}
	if remote != nil {
		info.Usage = &sandbox.Usage{
			CPUCores: remote.CPU,
			MemoryMB: int64(math.Round(remote.Memory * 1024)),
			DiskMB:   int64(math.Round(remote.Disk * 1024)),
		}
		info.Metadata["target"] = remote.Target
		info.LastUsedAt = remote.LastActivity()
	}
	info.Mounts = s.mounts.list()
	info.Network = networkInfo(network)
	return info, nil
}

// Instructions describes the sandbox to an agent in Mastra's exact
// sentences and order.
func (s *Sandbox) Instructions() string {
	s.mu.Lock()
	wd, o := s.workDir, s.opts
	s.mu.Unlock()
	parts := []string{fmt.Sprintf("Cloud sandbox with isolated execution (%s runtime).", o.Language)}
	if wd != "" {
		parts = append(parts, fmt.Sprintf("Default working directory: %s.", wd))
	}
	secs := 0
	if o.Timeout > 0 {
		secs = int(math.Ceil(o.Timeout.Seconds()))
	}
	parts = append(parts, fmt.Sprintf("Command timeout: %ds.", secs))
	user := o.User
	if user == "" {
		user = DefaultUser
	}
	parts = append(parts, fmt.Sprintf("Running as user: %s.", user))
	if n := len(o.Volumes); n > 0 {
		parts = append(parts, fmt.Sprintf("%d volume(s) attached.", n))
	}
	if o.Network.Mode == sandbox.NetworkBlocked {
		parts = append(parts, "Network access is blocked.")
	}
	return strings.Join(parts, " ")
}

// Detach releases this handle and leaves the background processes spawned
// through it running, for any later handle (in this process or another)
// to reach by id through its Processes. It is Close: a Daytona handle
// never kills its processes when released.
func (s *Sandbox) Detach(ctx context.Context) error { return s.Close(ctx) }

// Close releases this handle: it detaches from the background processes
// (which keep running in the sandbox) and closes its connections. The
// sandbox keeps running.
func (s *Sandbox) Close(ctx context.Context) error {
	err := s.mgr.Detach(ctx)
	s.tb.Close()
	if s.owned {
		s.api.Close()
	}
	return err
}
