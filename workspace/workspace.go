package workspace

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// ToolboxSandbox is a sandbox whose toolbox API a workspace reaches for
// files: the sandboxes of the local and daytona engines.
type ToolboxSandbox interface {
	sandbox.Sandbox
	// Client returns the client of the sandbox's toolbox API. It may be
	// used only once the sandbox runs.
	Client() *toolbox.Client
}

// Mounts is the seam for the filesystems a workspace mounts into its
// sandbox (package mount). The workspace calls Mount the first time it
// needs the sandbox and after each start it makes, and appends
// Instructions to its own.
type Mounts interface {
	// Mount mounts every filesystem into sb, which runs. Mounting what is
	// mounted already must do nothing.
	Mount(ctx context.Context, sb sandbox.Sandbox) error
	// Instructions describes the mounted filesystems to an agent; "" when
	// there are none.
	Instructions() string
}

// Config configures a Workspace.
type Config struct {
	// Sandbox is where commands run and files live. It must implement
	// [ToolboxSandbox]. Required.
	Sandbox sandbox.Sandbox
	// WorkingDirectory is the absolute path relative paths and commands
	// without a cwd use, created when the workspace first starts the
	// sandbox; "" means the sandbox's default.
	WorkingDirectory string
	// Mounts, when set, are mounted each time the workspace starts the
	// sandbox (see [Mounts]). Nil: none.
	Mounts Mounts
}

// Workspace is a sandbox with the files API, working directory rules and
// instructions an agent needs. It is safe for concurrent use.
type Workspace struct {
	sb     ToolboxSandbox
	wd     string
	mounts Mounts

	mu       sync.Mutex
	probed   string // the sandbox's default working directory, once asked
	prepared bool   // the working directory is made and the mounts mounted
}

// New returns a workspace over cfg.Sandbox. It does not start the
// sandbox: the first file operation or command does.
func New(cfg Config) (*Workspace, error) {
	if cfg.Sandbox == nil {
		return nil, fmt.Errorf("workspace: Config.Sandbox is nil: %w", sandbox.ErrInvalidArgument)
	}
	tb, ok := cfg.Sandbox.(ToolboxSandbox)
	if !ok {
		return nil, fmt.Errorf("workspace: sandbox %s (%T) has no toolbox client (a Client() *toolbox.Client method): %w", cfg.Sandbox.ID(), cfg.Sandbox, sandbox.ErrUnsupported)
	}
	if wd := cfg.WorkingDirectory; wd != "" && !path.IsAbs(wd) {
		return nil, fmt.Errorf("workspace: WorkingDirectory %q is not an absolute path: %w", wd, sandbox.ErrInvalidArgument)
	}
	wd := cfg.WorkingDirectory
	if wd != "" {
		wd = path.Clean(wd)
	}
	return &Workspace{sb: tb, wd: wd, mounts: cfg.Mounts}, nil
}

// Sandbox returns the workspace's sandbox.
func (w *Workspace) Sandbox() sandbox.Sandbox { return w.sb }

// Instructions describes the workspace to an agent, for its system prompt:
// the sandbox's instructions, the working directory when the workspace
// sets one, and the mounts' description.
func (w *Workspace) Instructions() string {
	parts := []string{w.sb.Instructions()}
	if w.wd != "" {
		parts = append(parts, fmt.Sprintf("Relative paths and commands without a cwd use the working directory %s.", w.wd))
	}
	if w.mounts != nil {
		if s := w.mounts.Instructions(); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Start starts the sandbox unless it runs; then, the first time and after
// each start it made, it creates Config.WorkingDirectory and mounts the
// workspace's mounts. File operations and commands call it themselves.
func (w *Workspace) Start(ctx context.Context) error {
	if w.sb.Status() != sandbox.StatusRunning {
		if _, err := w.sb.Start(ctx); err != nil {
			return fmt.Errorf("workspace: starting sandbox %s: %w", w.sb.ID(), err)
		}
		w.mu.Lock()
		w.prepared = false
		w.mu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.prepared {
		return nil
	}
	if w.wd != "" {
		if err := w.sb.Client().CreateFolder(ctx, w.wd, 0); err != nil {
			return fmt.Errorf("workspace: creating the working directory %s: %w", w.wd, err)
		}
	}
	if w.mounts != nil {
		if err := w.mounts.Mount(ctx, w.sb); err != nil {
			return fmt.Errorf("workspace: mounting into sandbox %s: %w", w.sb.ID(), err)
		}
	}
	w.prepared = true
	return nil
}

// client starts the sandbox if needed and returns its toolbox client.
func (w *Workspace) client(ctx context.Context) (*toolbox.Client, error) {
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w.sb.Client(), nil
}

// WorkingDirectory returns the directory relative paths are taken from:
// Config.WorkingDirectory, else the sandbox's default, asked once (which
// starts the sandbox).
func (w *Workspace) WorkingDirectory(ctx context.Context) (string, error) {
	if w.wd != "" {
		return w.wd, nil
	}
	w.mu.Lock()
	wd := w.probed
	w.mu.Unlock()
	if wd != "" {
		return wd, nil
	}
	c, err := w.client(ctx)
	if err != nil {
		return "", err
	}
	wd, err = c.WorkDir(ctx)
	if err != nil {
		return "", fmt.Errorf("workspace: asking sandbox %s for its working directory: %w", w.sb.ID(), err)
	}
	if !path.IsAbs(wd) {
		return "", fmt.Errorf("workspace: sandbox %s reports working directory %q, not an absolute path", w.sb.ID(), wd)
	}
	w.mu.Lock()
	w.probed = path.Clean(wd)
	w.mu.Unlock()
	return path.Clean(wd), nil
}

// Resolve returns the absolute, cleaned path p names: p itself when
// absolute, else p taken relative to the working directory.
func (w *Workspace) Resolve(ctx context.Context, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("workspace: the path is empty: %w", sandbox.ErrInvalidArgument)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("workspace: the path %q contains a NUL byte: %w", p, sandbox.ErrInvalidArgument)
	}
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	wd, err := w.WorkingDirectory(ctx)
	if err != nil {
		return "", err
	}
	return path.Join(wd, p), nil
}

// ExecOptions returns opts with its Cwd resolved by the working directory
// rules: a relative cwd is taken from the working directory, and no cwd
// means Config.WorkingDirectory when set. opts is not changed; nil is
// valid.
func (w *Workspace) ExecOptions(ctx context.Context, opts *sandbox.ExecOptions) (*sandbox.ExecOptions, error) {
	var o sandbox.ExecOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Cwd != "":
		cwd, err := w.Resolve(ctx, o.Cwd)
		if err != nil {
			return nil, err
		}
		o.Cwd = cwd
	case w.wd != "":
		o.Cwd = w.wd
	}
	return &o, nil
}

// ExecuteCommand runs command in the sandbox as
// sandbox.Sandbox.ExecuteCommand does, after starting the workspace and
// applying the working directory rules to opts.
func (w *Workspace) ExecuteCommand(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	o, err := w.ExecOptions(ctx, opts)
	if err != nil {
		return nil, err
	}
	return w.sb.ExecuteCommand(ctx, command, args, o)
}

// Spawn starts command in the background as ProcessManager.Spawn does,
// after starting the workspace and applying the working directory rules
// to opts.
func (w *Workspace) Spawn(ctx context.Context, command string, opts *sandbox.ExecOptions) (sandbox.Process, error) {
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	o, err := w.ExecOptions(ctx, opts)
	if err != nil {
		return nil, err
	}
	return w.sb.Processes().Spawn(ctx, command, o)
}

// IsNotFound reports whether err says that a file or process does not
// exist.
func IsNotFound(err error) bool { return errors.Is(err, sandbox.ErrNotFound) }
