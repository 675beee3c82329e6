package mount

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/redact"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Tools that plans run.
const (
	ToolS3FS    = "s3fs"
	ToolGCSFuse = "gcsfuse"
)

// PlanOptions say where and for whom a plan mounts.
type PlanOptions struct {
	// MountPoint is the folder the tool mounts on, as the tool sees it.
	MountPoint string
	// CredentialDir is the private folder (mode 0700) the credential
	// files go to, as the tool sees it; each mount needs its own.
	CredentialDir string
	// Owner, when not nil, owns every file of the mount (s3fs uid=,gid=;
	// gcsfuse --uid, --gid); otherwise the user who runs the tool does.
	Owner *Owner
	// Foreground keeps the tool in the foreground until the mount ends
	// (s3fs -f, gcsfuse --foreground), for a runner that supervises it.
	Foreground bool
	// AllowOther lets users other than the one who runs the tool use
	// the mount (-o allow_other): a sandbox's users, when the tool runs
	// on the host, or the sandbox's user when the tool runs as root.
	AllowOther bool
	// Emulator adds the flags an emulated server needs: gcsfuse's
	// --enable-hns=false (emulators have no storage-control API) and
	// --disable-autoconfig (no probing of the machine type). A
	// GCSFilesystem with an Endpoint implies it: a custom endpoint is
	// taken for an emulator (fake-gcs-server and the like).
	Emulator bool
}

// Owner is the uid and gid that own a mount's files.
type Owner struct{ UID, GID int }

// Plan is how to mount one filesystem with a FUSE tool: write Files
// (mode 0600, in a folder of mode 0700), then run Tool with Args and Env
// (plus, if EnvFile is set, the variables that file exports: run
// ShellCommand in a shell, or read them). Args and Env never hold a
// credential; Files do. Remove Files after unmounting.
type Plan struct {
	// Tool is the FUSE tool: ToolS3FS or ToolGCSFuse.
	Tool string
	// Args are the tool's arguments, without secrets.
	Args []string
	// Env is environment the tool needs ("NAME=value"), without secrets.
	Env []string
	// Files are the credential files to write before running Tool.
	Files []File
	// EnvFile, when not empty, is the Path of a file of Files holding
	// `export NAME='value'` lines (temporary credentials) that the
	// tool reads from its environment.
	EnvFile string
	// MountPoint is PlanOptions.MountPoint.
	MountPoint string
	// ConfigHash identifies the filesystem's configuration, credentials
	// included (see ConfigHash): a mount with another hash is replaced.
	ConfigHash string
	// ReadOnly reports a read-only mount.
	ReadOnly bool

	secrets []string
}

// File is a credential file of a plan.
type File struct {
	Path    string
	Content []byte
	// Mode is 0600.
	Mode fs.FileMode
	// Transient files may be removed as soon as the tool has mounted
	// (the tool read them at start); the others are kept until the
	// mount ends.
	Transient bool
}

// Argv returns the tool and its arguments.
func (p *Plan) Argv() []string { return append([]string{p.Tool}, p.Args...) }

// ShellCommand returns the plan as a POSIX shell command: its arguments
// quoted and, with an EnvFile, `. ‹file› && ` before the tool. It holds no
// credential.
func (p *Plan) ShellCommand() string {
	var b strings.Builder
	if p.EnvFile != "" {
		b.WriteString(". " + sandbox.ShellQuote(p.EnvFile) + " && ")
	}
	b.WriteString(p.Tool)
	for _, a := range p.Args {
		b.WriteString(" " + sandbox.ShellQuote(a))
	}
	return b.String()
}

// String is ShellCommand, with any credential removed.
func (p *Plan) String() string { return p.Redact(p.ShellCommand()) }

// Redact removes the plan's credentials from s (e.g. a tool's output).
func (p *Plan) Redact(s string) string { return redact.Text(s, p.secrets...) }

// NewPlan returns how to mount fs (an S3Filesystem or a GCSFilesystem,
// or a pointer to one) as o says. It validates fs and o.
func NewPlan(fsys sandbox.Filesystem, o PlanOptions) (*Plan, error) {
	if !path.IsAbs(o.MountPoint) {
		return nil, invalid("mount point %q is not an absolute path", o.MountPoint)
	}
	if !path.IsAbs(o.CredentialDir) {
		return nil, invalid("credential folder %q is not an absolute path", o.CredentialDir)
	}
	switch f := fsys.(type) {
	case S3Filesystem:
		return s3Plan(f, o)
	case *S3Filesystem:
		return s3Plan(*f, o)
	case GCSFilesystem:
		return gcsPlan(f, o)
	case *GCSFilesystem:
		return gcsPlan(*f, o)
	}
	return nil, fmt.Errorf("%w: no mount plan for %s filesystems", sandbox.ErrUnsupported, fsys.Kind())
}

// s3Plan is the s3fs plan of fs, as Mastra's: a passwd file for
// long-lived keys, an environment file and use_session_token for
// temporary ones, public_bucket=1 without credentials; path-style
// requests and SigV4 with an endpoint.
func s3Plan(fs S3Filesystem, o PlanOptions) (*Plan, error) {
	if err := fs.Validate(); err != nil {
		return nil, err
	}
	p := &Plan{Tool: ToolS3FS, MountPoint: o.MountPoint, ConfigHash: ConfigHash(fs), ReadOnly: fs.ReadOnly, secrets: fs.Secrets()}
	var opts []string
	switch {
	case fs.SessionToken != "":
		f := path.Join(o.CredentialDir, "credentials.env")
		var b strings.Builder
		for _, kv := range [][2]string{{"AWS_ACCESS_KEY_ID", fs.AccessKeyID}, {"AWS_SECRET_ACCESS_KEY", fs.SecretAccessKey}, {"AWS_SESSION_TOKEN", fs.SessionToken}} {
			b.WriteString("export " + kv[0] + "=" + sandbox.ShellQuote(kv[1]) + "\n")
		}
		p.Files = append(p.Files, File{Path: f, Content: []byte(b.String()), Mode: 0o600, Transient: true})
		p.EnvFile = f
		opts = append(opts, "use_session_token")
	case fs.hasKeys():
		f := path.Join(o.CredentialDir, "passwd-s3fs")
		p.Files = append(p.Files, File{Path: f, Content: []byte(fs.AccessKeyID + ":" + fs.SecretAccessKey + "\n"), Mode: 0o600})
		opts = append(opts, "passwd_file="+f)
	default:
		opts = append(opts, "public_bucket=1")
	}
	if o.AllowOther {
		opts = append(opts, "allow_other")
	}
	if o.Owner != nil {
		opts = append(opts, "uid="+strconv.Itoa(o.Owner.UID), "gid="+strconv.Itoa(o.Owner.GID), "umask=0022", "mp_umask=0022")
	}
	if fs.Endpoint != "" {
		opts = append(opts, "url="+strings.TrimRight(fs.Endpoint, "/"), "use_path_request_style", "sigv4")
	}
	if fs.Region != "" && fs.Region != "auto" {
		opts = append(opts, "endpoint="+fs.Region)
	}
	if fs.ReadOnly {
		opts = append(opts, "ro")
	}
	bucket := fs.Bucket
	if pre := normalizePrefix(fs.Prefix); pre != "" {
		bucket += ":/" + pre
	}
	p.Args = []string{bucket, o.MountPoint}
	if o.Foreground {
		p.Args = append(p.Args, "-f")
	}
	for _, opt := range opts {
		p.Args = append(p.Args, "-o", opt)
	}
	return p, nil
}

// gcsPlan is the gcsfuse plan of fs: a key file, or anonymous access
// without credentials; implicit folders; --only-dir with a prefix.
func gcsPlan(fs GCSFilesystem, o PlanOptions) (*Plan, error) {
	if err := fs.Validate(); err != nil {
		return nil, err
	}
	p := &Plan{Tool: ToolGCSFuse, MountPoint: o.MountPoint, ConfigHash: ConfigHash(fs), ReadOnly: fs.ReadOnly, secrets: fs.Secrets()}
	var args []string
	if len(fs.Credentials) > 0 {
		f := path.Join(o.CredentialDir, "key.json")
		p.Files = append(p.Files, File{Path: f, Content: fs.Credentials, Mode: 0o600})
		args = append(args, "--key-file="+f)
	} else {
		args = append(args, "--anonymous-access")
	}
	if o.Foreground {
		args = append(args, "--foreground")
	}
	args = append(args, "--implicit-dirs")
	if o.Owner != nil {
		args = append(args, "--uid="+strconv.Itoa(o.Owner.UID), "--gid="+strconv.Itoa(o.Owner.GID), "--file-mode=644", "--dir-mode=755")
	}
	if o.AllowOther {
		args = append(args, "-o", "allow_other")
	}
	if fs.ReadOnly {
		args = append(args, "-o", "ro")
	}
	if pre := normalizePrefix(fs.Prefix); pre != "" {
		args = append(args, "--only-dir="+pre)
	}
	if fs.Endpoint != "" {
		args = append(args, "--custom-endpoint="+fs.Endpoint)
	}
	if o.Emulator || fs.Endpoint != "" {
		args = append(args, "--enable-hns=false", "--disable-autoconfig")
	}
	if fs.ProjectID != "" {
		p.Env = append(p.Env, "GOOGLE_CLOUD_PROJECT="+fs.ProjectID)
	}
	p.Args = append(args, fs.Bucket, o.MountPoint)
	return p, nil
}
