package daytona

import (
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Defaults of Options, as Mastra's DaytonaSandbox has them.
const (
	DefaultLanguage         = "typescript"
	DefaultUser             = "daytona"
	DefaultAutoStopInterval = 15 * time.Minute
)

// LabelSandboxID is the label every sandbox the engine creates carries:
// the Options.ID it was created for (Mastra's mastra-sandbox-id).
const LabelSandboxID = "agentbox-sandbox-id"

// labelLanguage is the label Daytona's SDKs give a sandbox's language.
const labelLanguage = "code-toolbox-language"

// resourcesWarning is what New logs when Resources is set without Image,
// Mastra's words.
const resourcesWarning = "'resources' option requires 'image' to take effect — falling back to snapshot-based creation without custom resources"

// Options configures a Daytona sandbox. The zero value is valid: a
// sandbox of Daytona's default snapshot, credentials from the environment.
//
// The zero-value conventions are local.Options': a zero duration or
// string means the default, AutoStopInterval negative means never, and
// AutoDeleteInterval 0 means never (Ephemeral deletes the sandbox when it
// stops).
type Options struct {
	// ID is the sandbox's logical id, and its Daytona name unless Name is
	// set: the key a later process reconnects by. Default: a generated
	// "daytona-sandbox-…".
	ID string
	// Name is the sandbox's Daytona name. Default: ID.
	Name string

	// APIKey, APIURL and Target configure the control-plane client (see
	// Config); empty ones come from DAYTONA_API_KEY, DAYTONA_API_URL,
	// DAYTONA_TARGET or a .env file. Ignored when Client is set.
	APIKey, APIURL, Target string
	// Client is the control-plane client to use; default: one made from
	// the fields above.
	Client *Client

	// Timeout is the default per-command timeout: 0 means 5 minutes,
	// negative none.
	Timeout time.Duration
	// Language is the sandbox's runtime: "typescript" (default),
	// "javascript" or "python".
	Language string
	// Snapshot is the snapshot to create the sandbox from; it wins over
	// Image. Neither: Daytona's default snapshot.
	Snapshot string
	// Image is an image to build the sandbox from when Snapshot is empty.
	Image string
	// Resources size a sandbox built from Image; without Image they are
	// ignored, with a warning (Logf), as Daytona refuses them. Daytona
	// takes whole cores and whole GiB (multiples of 1024 MiB), and no
	// process limit (PIDs).
	Resources sandbox.Resources
	// BuildLogs receives the build logs of a sandbox built from Image.
	BuildLogs io.Writer

	// Env is the runtime environment overlay: applied to every command,
	// never sent at creation, so that a reconnection sees the current one.
	Env map[string]string
	// Labels are the sandbox's labels; LabelSandboxID is added.
	Labels map[string]string
	// User is the OS user commands run as. Default (the server's):
	// "daytona".
	User string
	// Public makes the sandbox's preview URLs work without a token.
	Public bool
	// Ephemeral deletes the sandbox when it stops.
	Ephemeral bool
	// AutoStopInterval stops the sandbox after this much idleness: 0
	// means 15 minutes, negative never. Whole minutes (rounded up).
	AutoStopInterval time.Duration
	// AutoArchiveInterval archives a stopped sandbox after this long: 0
	// means Daytona's default (7 days).
	AutoArchiveInterval time.Duration
	// AutoDeleteInterval deletes a stopped sandbox after this long: 0
	// means never (but see Ephemeral).
	AutoDeleteInterval time.Duration
	// Volumes are mounted at creation.
	Volumes []SandboxVolume
	// Network is the sandbox's network policy, validated as every
	// engine validates it (sandbox.NetworkPolicy.Canonical) and sent as
	// Daytona's networkBlockAll, networkAllowList and domainAllowList.
	// Daytona has no host mode (sandbox.NetworkHost).
	Network sandbox.NetworkPolicy
	// Secrets are the sandbox's secrets, as Mastra's secrets option: each
	// environment variable → the name of a secret of the organization
	// (SecretsService), whose placeholder the variable holds; Daytona's
	// egress proxy puts the value in requests to the secret's hosts.
	// Sent on create; kept, as Network, for a sandbox made again on
	// reconnection and for clones. UpdateSecrets changes them live.
	Secrets map[string]string
	// WorkingDirectory is the default working directory of commands.
	// Default: the sandbox's own (the user's home), found at start.
	WorkingDirectory string

	// MountEnv is added to the environment of the FUSE tools Mount runs
	// in the sandbox, e.g. GCE_METADATA_HOST for gcsfuse against an
	// emulator. It goes into the tool's command line: nothing secret.
	MountEnv map[string]string

	// Hooks run around lifecycle transitions.
	Hooks sandbox.Hooks
	// Logf logs warnings (Resources without Image). Default: none.
	Logf func(format string, args ...any)
}

// wireResources returns r in Daytona's units: whole cores and GiB. The
// error names the field and matches sandbox.ErrInvalidArgument.
func wireResources(r sandbox.Resources) (cpu, memoryGiB, diskGiB int, err error) {
	if err := r.Validate(); err != nil {
		return 0, 0, 0, err
	}
	mem, memWhole := sandbox.GiB(r.MemoryMiB)
	disk, diskWhole := sandbox.GiB(r.DiskMiB)
	switch {
	case r.CPUCores != math.Trunc(r.CPUCores) || r.CPUCores > math.MaxInt32:
		return 0, 0, 0, fmt.Errorf("%w: Resources.CPUCores %g: Daytona takes a whole number of cores", sandbox.ErrInvalidArgument, r.CPUCores)
	case !memWhole || mem > math.MaxInt32:
		return 0, 0, 0, fmt.Errorf("%w: Resources.MemoryMiB %d: Daytona takes whole GiB: use a multiple of 1024 MiB", sandbox.ErrInvalidArgument, r.MemoryMiB)
	case !diskWhole || disk > math.MaxInt32:
		return 0, 0, 0, fmt.Errorf("%w: Resources.DiskMiB %d: Daytona takes whole GiB: use a multiple of 1024 MiB", sandbox.ErrInvalidArgument, r.DiskMiB)
	case r.PIDs != 0:
		return 0, 0, 0, fmt.Errorf("%w: Resources.PIDs %d: Daytona sets no process limit: leave PIDs 0", sandbox.ErrInvalidArgument, r.PIDs)
	}
	return int(r.CPUCores), int(mem), int(disk), nil
}

// normalize checks o and fills in its defaults. Errors match
// sandbox.ErrInvalidArgument (sandbox.ErrInvalidEnv for an env name).
func (o Options) normalize() (Options, error) {
	invalid := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("daytona: %s: %w", fmt.Sprintf(format, args...), sandbox.ErrInvalidArgument)
	}
	if o.ID == "" {
		o.ID = newSandboxID()
	}
	if o.Name == "" {
		o.Name = o.ID
	}
	switch o.Language {
	case "":
		o.Language = DefaultLanguage
	case "typescript", "javascript", "python":
	default:
		return invalid("Language %q is not typescript, javascript or python", o.Language)
	}
	if o.Timeout == 0 {
		o.Timeout = sandbox.DefaultTimeout
	}
	if o.AutoStopInterval == 0 {
		o.AutoStopInterval = DefaultAutoStopInterval
	}
	for k := range o.Env {
		if !sandbox.ValidEnvName(k) {
			return Options{}, fmt.Errorf("daytona: Invalid environment variable name: %q: %w", k, sandbox.ErrInvalidEnv)
		}
	}
	for k := range o.MountEnv {
		if !sandbox.ValidEnvName(k) {
			return Options{}, fmt.Errorf("daytona: MountEnv: invalid environment variable name %q: use letters, digits and underscores, not starting with a digit: %w", k, sandbox.ErrInvalidEnv)
		}
	}
	o.MountEnv = maps.Clone(o.MountEnv)
	for _, v := range o.Volumes {
		if v.VolumeID == "" || !path.IsAbs(v.MountPath) || path.Clean(v.MountPath) == "/" {
			return invalid("volume %q at %q: a volume needs an id or name and an absolute mount path other than /", v.VolumeID, v.MountPath)
		}
	}
	var err error
	if o.Network, err = o.Network.Canonical(); err != nil {
		return Options{}, fmt.Errorf("daytona: Options.Network: %w", err)
	}
	if o.Network.Mode == sandbox.NetworkHost {
		return invalid("Options.Network: Daytona has no host network mode (HostNetwork): use the default, blocked or allowList mode")
	}
	if err := checkSecretRefs(o.Secrets); err != nil {
		return Options{}, fmt.Errorf("daytona: Options.Secrets: %w", err)
	}
	o.Secrets = maps.Clone(o.Secrets)
	if _, _, _, err := wireResources(o.Resources); err != nil {
		return Options{}, fmt.Errorf("daytona: Options.%w", err)
	}
	if o.WorkingDirectory != "" && !path.IsAbs(o.WorkingDirectory) {
		return invalid("WorkingDirectory %q is not absolute", o.WorkingDirectory)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// minutesOf returns d in whole minutes, rounded up.
func minutesOf(d time.Duration) int {
	return int((d + time.Minute - 1) / time.Minute)
}

// createRequest returns the create of a new sandbox for o, and whether it
// dropped o.Resources (no Image, or a Snapshot winning over it).
func (o *Options) createRequest(target string) (CreateSandbox, bool) {
	labels := map[string]string{labelLanguage: o.Language}
	for k, v := range o.Labels {
		labels[k] = v
	}
	labels[LabelSandboxID] = o.ID
	req := CreateSandbox{
		Name: o.Name, User: o.User, Labels: labels, Public: o.Public, Target: target,
		Volumes: o.Volumes,
	}
	req.NetworkBlockAll, req.NetworkAllowList, req.DomainAllowList = o.Network.Wire()
	req.Secrets = secretRefs(o.Secrets)
	stop := 0 // never
	if o.AutoStopInterval > 0 {
		stop = minutesOf(o.AutoStopInterval)
	}
	req.AutoStopInterval = &stop
	if o.AutoArchiveInterval > 0 {
		n := minutesOf(o.AutoArchiveInterval)
		req.AutoArchiveInterval = &n
	}
	switch {
	case o.Ephemeral:
		n := 0
		req.AutoDeleteInterval = &n
	case o.AutoDeleteInterval > 0:
		n := minutesOf(o.AutoDeleteInterval)
		req.AutoDeleteInterval = &n
	}
	dropped := o.Resources != (sandbox.Resources{})
	if o.Image != "" && o.Snapshot == "" {
		req.BuildInfo = &CreateBuildInfo{DockerfileContent: "FROM " + o.Image + "\n"}
		req.CPU, req.Memory, req.Disk, _ = wireResources(o.Resources) // checked by normalize
		dropped = false
	} else {
		req.Snapshot = o.Snapshot
	}
	return req, dropped
}

// newSandboxID returns "daytona-sandbox-" with the time and 6 random
// characters in base 36, as Mastra makes its ids.
func newSandboxID() string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b strings.Builder
	for range 6 {
		n, _ := rand.Int(rand.Reader, big.NewInt(36)) // never fails (crypto/rand)
		b.WriteByte(digits[n.Int64()])
	}
	return "daytona-sandbox-" + strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + b.String()
}
