package local

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Defaults of [Options].
const (
	DefaultUser             = "agent"
	DefaultLanguage         = "shell"
	DefaultAutoStopInterval = 15 * time.Minute
)

// Options configures a local sandbox. The zero value is valid.
type Options struct {
	// ID names the sandbox in its state dir. Default: a generated "sbx-…".
	// It must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
	ID string
	// Name is a human name kept in the metadata.
	Name string
	// StateDir holds every sandbox's folder. Default: DefaultStateDir().
	StateDir string
	// Env is the runtime environment overlay merged into every command's
	// environment. It is never written into the sandbox.
	Env map[string]string
	// Labels are kept in the metadata and shown by Info.
	Labels map[string]string
	// Timeout is the default per-command timeout. Default: 5 minutes.
	Timeout time.Duration
	// Language is informational (Info, Instructions). Default: "shell".
	Language string
	// User is the user name shown inside; the home is /home/<User>.
	// Default: "agent". Commands run as uid 0 of the sandbox's user
	// namespace, which is an unprivileged uid on the host.
	User string
	// Ephemeral sandboxes are destroyed when they stop. One that stopped
	// itself (AutoStopInterval) is removed as soon as a host process next
	// looks at the state dir (New+Start, List, Lookup).
	Ephemeral bool
	// AutoStopInterval is the idle time (no toolbox request) after which
	// the sandbox stops itself. 0 means 15 minutes; negative means never.
	// Info reports the last request as LastUsedAt and, while the sandbox
	// runs, LastUsedAt + AutoStopInterval as TimeoutAt.
	AutoStopInterval time.Duration
	// AutoDeleteInterval is how long a stopped sandbox is kept before it is
	// deleted (checked whenever the state dir is read). 0 means never.
	AutoDeleteInterval time.Duration
	// WorkingDirectory is the default working directory of commands.
	// Default: the home. It must be absolute.
	WorkingDirectory string
	// Volumes are named persistent folders under <StateDir>/volumes/<name>,
	// bound into the sandbox; several sandboxes may share one.
	Volumes []Volume
	// NetworkBlockAll gives the sandbox its own network namespace with only
	// loopback. By default the sandbox shares the host network, as Daytona
	// sandboxes have network access by default.
	NetworkBlockAll bool
	// Hooks run around lifecycle transitions.
	Hooks sandbox.Hooks
}

// Volume is a named persistent folder bound into a sandbox.
type Volume struct {
	// Name names the folder <StateDir>/volumes/<Name>; same rules as an id.
	Name string `json:"name"`
	// MountPath is the absolute path inside the sandbox.
	MountPath string `json:"mountPath"`
	// ReadOnly binds the folder read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

var userPattern = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// ValidateID returns an error matching sandbox.ErrInvalidArgument unless id
// is a valid sandbox or volume id.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("%w: sandbox id %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, without \"..\"", sandbox.ErrInvalidArgument, id)
	}
	return nil
}

// DefaultStateDir returns $AGENTBOX_STATE_DIR, else $XDG_STATE_HOME/agentbox,
// else ~/.local/state/agentbox.
func DefaultStateDir() string {
	if d := os.Getenv("AGENTBOX_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agentbox")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".local", "state", "agentbox")
}

func generateID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sbx-" + hex.EncodeToString(b[:])
}

// normalize fills defaults and validates. It does no I/O.
func (o Options) normalize() (Options, error) {
	if o.ID == "" {
		o.ID = generateID()
	}
	if err := ValidateID(o.ID); err != nil {
		return o, err
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir()
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return o, fmt.Errorf("%w: state dir %q: %v", sandbox.ErrInvalidArgument, o.StateDir, err)
	}
	o.StateDir = abs
	if o.Timeout < 0 {
		return o, fmt.Errorf("%w: negative Timeout %v", sandbox.ErrInvalidArgument, o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = sandbox.DefaultTimeout
	}
	if o.Language == "" {
		o.Language = DefaultLanguage
	}
	if o.User == "" {
		o.User = DefaultUser
	}
	if !userPattern.MatchString(o.User) {
		return o, fmt.Errorf("%w: user name %q: use lower-case letters, digits, '_' or '-', starting with a letter or '_'", sandbox.ErrInvalidArgument, o.User)
	}
	if o.AutoStopInterval == 0 {
		o.AutoStopInterval = DefaultAutoStopInterval
	}
	if o.AutoDeleteInterval < 0 {
		o.AutoDeleteInterval = 0
	}
	home := "/home/" + o.User
	if o.WorkingDirectory == "" {
		o.WorkingDirectory = home
	}
	if o.WorkingDirectory, err = cleanInsidePath("WorkingDirectory", o.WorkingDirectory); err != nil {
		return o, err
	}
	if err := sandbox.ValidateEnv(o.Env); err != nil {
		return o, err
	}
	o.Volumes = slices.Clone(o.Volumes)
	o.Labels = maps.Clone(o.Labels)
	seen := map[string]bool{}
	for i, v := range o.Volumes {
		if err := ValidateID(v.Name); err != nil {
			return o, fmt.Errorf("volume %d: %w", i, err)
		}
		if v.MountPath, err = cleanInsidePath("volume "+v.Name+" MountPath", v.MountPath); err != nil {
			return o, err
		}
		if reservedPath(v.MountPath) || v.MountPath == home || v.MountPath == "/tmp" {
			return o, fmt.Errorf("%w: volume %s: mount path %s is reserved; choose a path such as /data or %s/data", sandbox.ErrInvalidArgument, v.Name, v.MountPath, home)
		}
		if seen[v.MountPath] {
			return o, fmt.Errorf("%w: two volumes mounted at %s", sandbox.ErrInvalidArgument, v.MountPath)
		}
		seen[v.MountPath] = true
		o.Volumes[i] = v
	}
	if reservedPath(o.WorkingDirectory) && o.WorkingDirectory != "/tmp" && !strings.HasPrefix(o.WorkingDirectory, "/tmp/") {
		return o, fmt.Errorf("%w: WorkingDirectory %s is inside a read-only system folder; choose a path under %s, /tmp or a new top-level folder such as /workspace", sandbox.ErrInvalidArgument, o.WorkingDirectory, home)
	}
	return o, nil
}

func cleanInsidePath(what, p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("%w: %s %q must be an absolute path", sandbox.ErrInvalidArgument, what, p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %s %q must not contain \"..\"", sandbox.ErrInvalidArgument, what, p)
		}
	}
	return path.Clean(p), nil
}

// reservedPath reports whether p is, or is inside, a folder the sandbox
// sees read-only or that the init manages.
func reservedPath(p string) bool {
	if p == "/" {
		return true
	}
	for _, r := range []string{"/usr", "/etc", "/proc", "/dev", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys", "/run"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}
