package local

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Defaults of [Options] and [Config].
const (
	DefaultUser             = "agent"
	DefaultLanguage         = "shell"
	DefaultAutoStopInterval = 15 * time.Minute
)

// Options configures a local sandbox handle. The zero value is valid.
//
// Options holds three kinds of settings:
//   - which sandbox: ID and StateDir;
//   - per handle: Env, Timeout, Hooks and HostIDBase belong to the object
//     [New] returns, are never persisted, and may differ between two
//     handles of one sandbox;
//   - create-time: the embedded [Config] shapes the sandbox when it is
//     created and is persisted with it; a handle of a sandbox that already
//     exists adopts the sandbox's own Config in place of this one.
//
// # Create-time settings of an existing sandbox
//
// A sandbox keeps the Config it was created with. For a sandbox that
// exists, each field of Config left at its zero value (false, 0, "", or a
// nil or empty map or slice) means "what the sandbox has": reconnecting by
// ID alone, with a zero Config, always works. A field set to a value that
// differs from the sandbox's (after the defaults of a new sandbox are
// filled in: User "agent" equals an unset User on a sandbox created without
// one) is never silently dropped: Start fails with a [*ConfigMismatchError]
// naming each such field with both values, matching [ErrConfigMismatch] and
// [sandbox.ErrInvalidArgument]. Remove the sandbox to create it anew, or
// use another ID. The network policy of a sandbox changes with
// [Sandbox.UpdateNetworkSettings] (of a handle from [New] or [Open]), which
// records it as the sandbox's Config.
type Options struct {
	// ID names the sandbox in its state dir. Default: a generated "sbx-…".
	// It must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
	ID string
	// StateDir holds every sandbox's folder. Default: DefaultStateDir().
	// It must be private to this user (see CheckStateDir).
	StateDir string

	// Env is the runtime environment overlay merged into every command's
	// environment. It is never written into the sandbox. Per handle.
	Env map[string]string
	// Timeout is the default per-command timeout. Default: 5 minutes.
	// Per handle.
	Timeout time.Duration
	// Hooks run around lifecycle transitions. Per handle.
	Hooks sandbox.Hooks
	// HostIDBase is where the host uid ranges that sandboxes created as
	// root get start: each sandbox gets 65536 host uids (and gids) of its
	// own, from a pool recorded in the state dir. Default (0):
	// DefaultHostIDBase. Otherwise a multiple of 65536 from 65536 to
	// 0x7FFD0000; ranges that overlap one listed in /etc/subuid or
	// /etc/subgid, or hold the id of a user of /etc/passwd or a group of
	// /etc/group, are skipped. It only affects sandboxes created from now
	// on: a sandbox keeps its range. Per handle.
	HostIDBase int
	// DiskBudgetMB is the most, in MiB, that the disk images of the state
	// dir's sandboxes may add up to, each counted at its full size (as
	// though every sandbox filled its disk): a create whose disk image
	// would exceed it fails before anything is made, with an error
	// matching [ErrDiskBudget]; a default DiskMB shrinks to fit what is
	// left. Default (0): the space free on the state dir's file system
	// plus what its disk images already take, less a reserve for the host
	// of 5% of the file system (at least 1 GiB): sparse images can never
	// together fill the host's disk. Per handle: it applies to the
	// sandboxes created through this handle.
	DiskBudgetMB int64

	// Mount adjusts how the FUSE tools of mounts made through this handle
	// run (Sandbox.Mount). Per handle.
	Mount MountOptions
	// Pool, when set, gives the sandbox, if it is new and its settings
	// allow, an init started ahead of time (see Pool): a faster create.
	// The pool must serve StateDir. Per handle.
	Pool *Pool

	// Config shapes the sandbox when it is created.
	Config
}

// Config holds the settings that shape a sandbox. They take effect when the
// sandbox is created, are stored as they are in its metadata, and every
// later handle of the sandbox adopts the stored ones, as a Daytona sandbox
// keeps what it was created with; a later handle that sets a field to
// another value fails to start (see [Options]). The zero value is valid.
type Config struct {
	// A new create-time setting is one field here, with its validation in
	// Config.normalize when it needs one: the field is persisted, adopted by
	// later handles and sent to the sandbox's init (initConfig embeds
	// Config) without further code.

	// Name is a human name kept in the metadata.
	Name string `json:"name,omitempty"`
	// Labels are kept in the metadata and shown by Info.
	Labels map[string]string `json:"labels,omitempty"`
	// User is the user name shown inside; the home is /home/<User>.
	// Default: "agent". Commands run as uid 0 of the sandbox's user
	// namespace, which is an unprivileged uid on the host.
	User string `json:"user"`
	// Language is informational (Info, Instructions). Default: "shell".
	Language string `json:"language"`
	// WorkingDirectory is the default working directory of commands.
	// Default: the home. It must be absolute.
	WorkingDirectory string `json:"workingDirectory"`
	// Ephemeral sandboxes are destroyed when they stop. One that stopped
	// itself (AutoStopInterval) is removed as soon as a host process next
	// looks at the state dir (New+Start, List, Open).
	Ephemeral bool `json:"ephemeral,omitempty"`
	// AutoStopInterval is the idle time (no toolbox request) after which
	// the sandbox stops itself. 0 means 15 minutes; negative means never.
	// Info reports the last request (but a passive one,
	// PassiveRequestHeader) as LastUsedAt and, while the sandbox
	// runs, LastUsedAt + AutoStopInterval as TimeoutAt.
	AutoStopInterval time.Duration `json:"autoStopInterval"`
	// AutoDeleteInterval is how long a stopped sandbox is kept before it is
	// deleted (checked whenever the state dir is read). 0 means never.
	AutoDeleteInterval time.Duration `json:"autoDeleteInterval,omitempty"`
	// Volumes are named persistent folders under <StateDir>/volumes/<name>,
	// bound into the sandbox; several sandboxes may share one.
	Volumes []Volume `json:"volumes,omitempty"`
	// The network. By default (none of the fields below set) a sandbox
	// has a network namespace of its own and reaches the public internet
	// only: not the host (its loopback services, abstract unix sockets and
	// addresses), not its networks, not private, shared or link-local
	// ranges (cloud metadata at 169.254.169.254 included), not other
	// sandboxes; DNS works through the host's resolver; nothing reaches
	// the sandbox but the ports published with [Sandbox.PublishPort]. See
	// network.go for the details and what needs root.
	// [Sandbox.UpdateNetworkSettings] changes the policy of a running
	// sandbox.

	// Network is the sandbox's network policy (one type for every
	// engine, validated by sandbox.NetworkPolicy.Canonical), by Mode:
	//   - NetworkPublic, the default: as above;
	//   - NetworkBlocked: loopback only;
	//   - NetworkAllowList: Allow limits the sandbox to the address
	//     ranges it lists: everything else is refused, DNS included (no
	//     name resolves; list names in Domains to reach them through the
	//     egress proxy). Private ranges may be listed; loopback,
	//     link-local (169.254.0.0/16, fe80::/10), multicast and the
	//     sandboxes' own ranges are never reachable, nor the host's own
	//     addresses. Needs root. Domains limits the sandbox's network to
	//     the names it lists ("pypi.org", "*.github.com": every name below
	//     github.com, not github.com itself): commands reach them through
	//     an egress proxy on the host (HTTP_PROXY, HTTPS_PROXY and
	//     ALL_PROXY name it: http://127.0.0.1:3128,
	//     socks5h://127.0.0.1:3128) that resolves names itself and
	//     refuses IP addresses, other names, and names that lead to
	//     non-public addresses; with Domains alone the sandbox has
	//     loopback only and DNS does not resolve inside. Refusals are
	//     logged; Info shows the last of them;
	//   - NetworkHost (HostNetwork) shares the host's network namespace
	//     with the sandbox: UNSAFE, commands reach every service of the
	//     host (those listening on its loopback and its abstract unix
	//     sockets included), its networks and other sandboxes' published
	//     ports, and can listen on its interfaces. Only for trusted
	//     commands that need it; it cannot change later.
	//
	// sandbox.ParseNetworkPolicy reads Daytona's wire form
	// (networkBlockAll, networkAllowList, domainAllowList).
	// Stored in canonical form.
	Network sandbox.NetworkPolicy `json:"network,omitzero"`
	// Secrets are values commands may send to some hosts but never read
	// (see sandbox.Secret): each command's environment holds the secret's
	// Name set to a placeholder, which the sandbox's egress proxy replaces
	// with the value in requests to the secret's hosts. Never stored in the
	// metadata nor sent to the init (json "-"): the engine keeps them in a
	// file of the sandbox's host folder, mode 0600, the values sealed.
	// They shape a new sandbox only (a handle of an existing one ignores
	// them, and no mismatch is reported): [Sandbox.SetSecrets] replaces an
	// existing sandbox's, running or not. A host-mode or blocked sandbox
	// cannot hold secrets (no proxy of the engine sees its traffic).
	Secrets []sandbox.Secret `json:"-"`
	// Confinement holds the explicit opt-outs of the system call filter
	// and Landlock rules every command runs under. The zero value is the
	// safe default; Info (Metadata "syscallFilter" and "landlock") and
	// Instructions say what is in force.
	Confinement Confinement `json:"confinement,omitzero"`
	// Image is the image the sandbox's root file system is made of: a
	// reference the image store resolves (a registry reference such as
	// "python:3.12-slim", "oci:DIR[:tag]", a `docker save` tarball, or an
	// absolute rootfs folder), pulled when the store lacks it. The root is
	// then an overlay of the image's layers, ID-mapped onto the sandbox's
	// ids, with a writable layer of the sandbox's own (on its disk image,
	// so the disk limit covers it) that persists across Stop and Start;
	// the image's Env, WorkingDir and Entrypoint/Cmd apply (root.go).
	// Commands then hold Docker's default capabilities inside the
	// sandbox's user namespace (DefaultCapabilities). Needs root. Empty:
	// the root is made of the host's system folders, writable as root
	// (see ReadOnlyRoot and the package documentation).
	Image string `json:"image,omitempty"`
	// Snapshot creates the sandbox from a snapshot (see [Sandbox.CreateSnapshot])
	// instead: its root is the snapshot's base image with the frozen
	// writable layer on top. It wins over Image, as Daytona's snapshot
	// wins over its image. Needs root.
	Snapshot string `json:"snapshot,omitempty"`
	// ReadOnlyRoot keeps the host's system folders (/usr, /etc …)
	// read-only in a sandbox made with neither Image nor Snapshot, as
	// sandboxes started without root have them, instead of the writable
	// root made of them that root gives by default: commands then hold no
	// capabilities at all and cannot install system packages, and the
	// sandbox starts a little faster. Not together with Image or
	// Snapshot.
	ReadOnlyRoot bool `json:"readOnlyRoot,omitempty"`
	// Resources limits the sandbox's CPU, memory, processes and disk; the
	// zero value gives every default this host can enforce (see
	// [Resources]). Info (Limits) and Instructions say what is enforced.
	// Stored as asked: zero fields are resolved at each start (the disk's
	// size at creation), and a later handle that sets Resources must set
	// the same values.
	Resources Resources `json:"resources,omitzero"`
	// DaytonaToolbox runs the sandbox's toolbox server in its
	// Daytona-behaviour mode (package toolbox/daemon, Options.Daytona):
	// it reproduces the quirks of Daytona's own daemon and offers no
	// agentbox extension. For testing clients against those quirks
	// (agentbox serve's test knobs), not for use.
	DaytonaToolbox bool `json:"daytonaToolbox,omitempty"`
}

// Confinement relaxes, explicitly, what every command of a sandbox runs
// under. By default each command (one-shot, session, background process,
// and their children) has:
//   - a seccomp filter modelled on Docker's default profile: it refuses
//     with EPERM the kernel keyrings (keyctl, add_key, request_key), bpf,
//     perf_event_open, userfaultfd, io_uring, loading kernels and modules,
//     file handles (open_by_handle_at, name_to_handle_at), the mount
//     family (mount, umount2, pivot_root, open_tree, move_mount, fsopen,
//     fsmount, fsconfig, fspick, mount_setattr), new namespaces (unshare
//     and clone with a CLONE_NEW* flag, setns), reboot, swap, process
//     accounting, setting the clock, the kernel log, quotas, vhangup,
//     fanotify, AF_VSOCK sockets and personality changes other than
//     Docker's harmless ones; clone3 answers ENOSYS so that libc falls
//     back to clone, whose flags the filter can see. System calls of the
//     32-bit ABIs (int 0x80 on amd64, AArch32 on arm64) answer ENOSYS: a
//     deny list they would bypass is worth nothing, so 32-bit programs do
//     not run in a sandbox;
//   - where the kernel has Landlock ABI 6 or later, Landlock scoping:
//     commands cannot connect to abstract unix sockets, nor send signals,
//     outside the sandbox's commands (the sandbox's init and every host
//     process included).
//
// The sandbox's init is not dumpable whatever the Confinement, so
// commands cannot ptrace it or read its memory, environment or file
// descriptors through /proc/1.
type Confinement struct {
	// AllowNestedNamespaces lets commands create user namespaces (and,
	// inside them, mount, network, PID … namespaces), enter namespaces
	// (setns) and mount inside them: what bwrap, unshare -r, rootless
	// Podman or Chromium's sandbox need. Commands then hold CAP_SETFCAP
	// (and no other capability), without which the kernel refuses to map
	// the sandbox's root, their uid, into a namespace they create;
	// no_new_privs keeps file capabilities from granting anything. /proc
	// then shows /proc/keys, which is hidden otherwise (the kernel mounts
	// no new /proc over one with hidden files). It exposes kernel code that
	// only a namespace's root reaches (nf_tables, for one) to the
	// sandbox's commands: grant it only to tools that need it.
	AllowNestedNamespaces bool `json:"allowNestedNamespaces,omitempty"`
	// Unconfined turns the seccomp filter and Landlock off, like Docker's
	// seccomp=unconfined, and allows nested namespaces as
	// AllowNestedNamespaces does: commands keep the namespaces,
	// no_new_privs and no capability but CAP_SETFCAP. Meant for finding
	// out whether the confinement is what breaks a tool, not for
	// untrusted code.
	Unconfined bool `json:"unconfined,omitempty"`
	// AllowFUSE lets commands mount FUSE file systems (s3fs, gcsfuse,
	// sshfs …), as Daytona's sandboxes do: /dev/fuse is present, and the
	// sandbox's init mounts, on a command's behalf, what its mount(2)
	// asks when the file system type is "fuse" or "fuse.NAME" and the
	// request holds up (fuse_linux.go): the /dev/fuse descriptor named by
	// fd= is the caller's own, the mount point is a folder outside /proc,
	// /sys, /dev and the init's /run/agentbox, and a caller other than the
	// sandbox's root owns the mount point and mounts as itself (user_id=),
	// as fusermount3 would check. Such mounts are always nosuid and nodev.
	// umount2 of a FUSE mount is done the same way (by root, or the user
	// who mounted it). Every other mount, and the new mount API (fsopen
	// …), stays refused. The host makes the sandbox's /dev/fuse node
	// (which needs root), or binds the host's when it is open to every
	// user.
	AllowFUSE bool `json:"allowFUSE,omitempty"`
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

// sandboxTmp is the sandbox's /tmp, a folder of its state folder.
const sandboxTmp = "/tmp"

// home returns the sandbox's home folder, /home/<User>.
func (c *Config) home() string { return "/home/" + c.User }

// validID and validUser check ids and user names by hand: the regular
// expressions they replace (^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ and
// ^[a-z_][a-z0-9_-]{0,31}$) cost about 0.7 ms to compile, paid by every
// CLI command, which validates an id, and ListSummaries matched one per
// sandbox.
func validID(id string) bool {
	if len(id) < 1 || len(id) > 64 || !isAlnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func validUser(u string) bool {
	if len(u) < 1 || len(u) > 32 || !(isLower(u[0]) || u[0] == '_') {
		return false
	}
	for i := 1; i < len(u); i++ {
		if c := u[i]; !isLower(c) && !('0' <= c && c <= '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

func isAlnum(c byte) bool { return isLower(c) || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }

// ValidateID returns an error matching sandbox.ErrInvalidArgument unless id
// is a valid sandbox or volume id.
func ValidateID(id string) error {
	if !validID(id) || strings.Contains(id, "..") {
		return fmt.Errorf("%w: sandbox id %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, without \"..\"", sandbox.ErrInvalidArgument, id)
	}
	return nil
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
	var err error
	if o.StateDir, err = absStateDir(o.StateDir); err != nil {
		return o, err
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("%w: negative Timeout %v", sandbox.ErrInvalidArgument, o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = sandbox.DefaultTimeout
	}
	if err := sandbox.ValidateEnv(o.Env); err != nil {
		return o, err
	}
	if o.DiskBudgetMB < 0 {
		return o, fmt.Errorf("%w: negative DiskBudgetMB %d; use 0 for the default", sandbox.ErrInvalidArgument, o.DiskBudgetMB)
	}
	if err := validHostIDBase(o.HostIDBase); err != nil {
		return o, fmt.Errorf("%w: %v", sandbox.ErrInvalidArgument, err)
	}
	if o.Pool != nil && (o.Pool.stateDir != o.StateDir || o.Pool.base != o.HostIDBase) {
		return o, fmt.Errorf("%w: Options.Pool serves the state dir %s (HostIDBase %d), not %s (HostIDBase %d): use a pool made for this state dir", sandbox.ErrInvalidArgument, o.Pool.stateDir, o.Pool.base, o.StateDir, o.HostIDBase)
	}
	o.Config, err = o.Config.normalize()
	return o, err
}

// absStateDir returns the absolute path of the state dir d
// (DefaultStateDir when empty).
func absStateDir(d string) (string, error) {
	if d == "" {
		var err error
		if d, err = DefaultStateDir(); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("%w: state dir %q: %v", sandbox.ErrInvalidArgument, d, err)
	}
	return abs, nil
}

// normalize fills the defaults of c and validates it. It does no I/O.
func (c Config) normalize() (Config, error) {
	if c.Language == "" {
		c.Language = DefaultLanguage
	}
	if c.User == "" {
		c.User = DefaultUser
	}
	if !validUser(c.User) {
		return c, fmt.Errorf("%w: user name %q: use lower-case letters, digits, '_' or '-', starting with a letter or '_'", sandbox.ErrInvalidArgument, c.User)
	}
	if c.AutoStopInterval == 0 {
		c.AutoStopInterval = DefaultAutoStopInterval
	}
	if c.AutoDeleteInterval < 0 {
		c.AutoDeleteInterval = 0
	}
	home := c.home()
	if c.WorkingDirectory == "" {
		c.WorkingDirectory = home
	}
	var err error
	if c.WorkingDirectory, err = cleanInsidePath("WorkingDirectory", c.WorkingDirectory); err != nil {
		return c, err
	}
	c.Labels = maps.Clone(c.Labels)
	if c.Volumes, err = normalizeVolumes(c.Volumes, home); err != nil {
		return c, err
	}
	if err := normalizeNetwork(&c); err != nil {
		return c, err
	}
	if c.Secrets, err = normalizeSecrets(&c); err != nil {
		return c, err
	}
	if c.Resources, err = normalizeResources(c.Resources); err != nil {
		return c, err
	}
	if c.ReadOnlyRoot && (c.Image != "" || c.Snapshot != "") {
		return c, sandbox.NewOptionError(sandbox.ErrInvalidArgument, sandbox.OptionReadOnlyRoot, " applies to sandboxes made of the host's system folders, not to one made of an image or snapshot: leave ", sandbox.OptionReadOnlyRoot, " unset, or ", sandbox.OptionImage, " and ", sandbox.OptionSnapshot, " empty")
	}
	if reservedPath(c.WorkingDirectory) && !within(c.WorkingDirectory, sandboxTmp) {
		return c, fmt.Errorf("%w: WorkingDirectory %s is inside a read-only system folder; choose a path under %s, /tmp or a new top-level folder such as /workspace", sandbox.ErrInvalidArgument, c.WorkingDirectory, home)
	}
	return c, nil
}

// normalizeVolumes returns a validated copy of vols, their mount paths
// cleaned, for a sandbox whose home is home.
func normalizeVolumes(vols []Volume, home string) ([]Volume, error) {
	vols = slices.Clone(vols)
	seen := map[string]bool{}
	for i, v := range vols {
		if err := ValidateID(v.Name); err != nil {
			return nil, fmt.Errorf("volume %d: %w", i, err)
		}
		var err error
		if v.MountPath, err = cleanInsidePath("volume "+v.Name+" MountPath", v.MountPath); err != nil {
			return nil, err
		}
		if reservedPath(v.MountPath) || v.MountPath == home || v.MountPath == sandboxTmp {
			return nil, fmt.Errorf("%w: volume %s: mount path %s is reserved; choose a path such as /data or %s/data", sandbox.ErrInvalidArgument, v.Name, v.MountPath, home)
		}
		if seen[v.MountPath] {
			return nil, fmt.Errorf("%w: two volumes mounted at %s", sandbox.ErrInvalidArgument, v.MountPath)
		}
		seen[v.MountPath] = true
		vols[i] = v
	}
	return vols, nil
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

// within reports whether the clean path p is base or inside it.
func within(p, base string) bool {
	return p == base || strings.HasPrefix(p, base+"/")
}

// reservedPath reports whether p is, or is inside, a folder the sandbox
// sees read-only or that the init manages.
func reservedPath(p string) bool {
	if p == "/" {
		return true
	}
	for _, r := range []string{"/usr", "/etc", "/proc", "/dev", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys", "/run"} {
		if within(p, r) {
			return true
		}
	}
	return false
}
