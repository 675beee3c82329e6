package sandbox

import (
	"context"
	"fmt"
)

// Filesystem is storage a sandbox can mount at a path, such as a bucket
// (package mount: S3Filesystem, GCSFilesystem). Its String describes it
// without credentials, e.g. "s3://bucket/prefix".
type Filesystem interface {
	// Kind is the filesystem's type: "s3", "gcs", …
	Kind() string
	// String describes the filesystem for people and logs; it never holds
	// a credential.
	String() string
}

// Mounter is implemented by sandboxes that can mount a [Filesystem]. Use
// the [Mount], [Unmount] and [Mounts] functions, which report
// ErrUnsupported for sandboxes that cannot.
type Mounter interface {
	// Mount mounts fs at path, an absolute path inside the sandbox. The
	// mount is kept across Stop and Start and ends with Unmount or
	// Destroy. Mounting again at the same path with the same filesystem
	// (credentials included) is a no-op; with another, it replaces the
	// mount. A failure is a *MountError.
	Mount(ctx context.Context, fs Filesystem, path string) error
	// Unmount removes the mount at path; it fails with an error matching
	// ErrNotFound when nothing is mounted there.
	Unmount(ctx context.Context, path string) error
	// Mounts lists the sandbox's mounts, in the order they were made.
	Mounts(ctx context.Context) ([]MountInfo, error)
}

// MountState is the state of one mount, as in Mastra's MountManager.
type MountState string

// Mount states.
const (
	// MountPending: recorded, not mounted yet (e.g. the sandbox is
	// stopped; it is mounted at the next start).
	MountPending MountState = "pending"
	// MountMounting: being mounted.
	MountMounting MountState = "mounting"
	// MountMounted: in place and usable.
	MountMounted MountState = "mounted"
	// MountError: the last attempt failed; MountInfo.Error says why.
	MountError MountState = "error"
	// MountUnsupported: the sandbox cannot mount this kind of filesystem.
	MountUnsupported MountState = "unsupported"
	// MountUnavailable: the tool that mounts it (s3fs, gcsfuse) is missing.
	MountUnavailable MountState = "unavailable"
)

// MountFailure is the error of a failed Mount or Unmount: it names the path
// and the filesystem (without credentials) and wraps the cause, e.g.
// ErrInvalidArgument for a bad path or ErrUnsupported.
type MountFailure struct {
	Op         string // "mount" or "unmount"
	Path       string
	Filesystem string // the Filesystem's String, if known
	Err        error
}

func (e *MountFailure) Error() string {
	if e.Filesystem != "" {
		return fmt.Sprintf("%s %s at %s: %v", e.Op, e.Filesystem, e.Path, e.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *MountFailure) Unwrap() error { return e.Err }

// Mount mounts fs at path in sb, if sb is a [Mounter]; otherwise it fails
// with a *MountFailure matching ErrUnsupported.
func Mount(ctx context.Context, sb Sandbox, fs Filesystem, path string) error {
	m, ok := sb.(Mounter)
	if !ok {
		return &MountFailure{Op: "mount", Path: path, Filesystem: fs.String(), Err: fmt.Errorf("%w: %s sandboxes cannot mount filesystems", ErrUnsupported, sb.Provider())}
	}
	return m.Mount(ctx, fs, path)
}

// Unmount removes the mount at path in sb, if sb is a [Mounter];
// otherwise it fails with a *MountFailure matching ErrUnsupported.
func Unmount(ctx context.Context, sb Sandbox, path string) error {
	m, ok := sb.(Mounter)
	if !ok {
		return &MountFailure{Op: "unmount", Path: path, Err: fmt.Errorf("%w: %s sandboxes cannot mount filesystems", ErrUnsupported, sb.Provider())}
	}
	return m.Unmount(ctx, path)
}

// Mounts lists the mounts of sb, if sb is a [Mounter]; otherwise it fails
// with an error matching ErrUnsupported.
func Mounts(ctx context.Context, sb Sandbox) ([]MountInfo, error) {
	m, ok := sb.(Mounter)
	if !ok {
		return nil, fmt.Errorf("list mounts: %w: %s sandboxes cannot mount filesystems", ErrUnsupported, sb.Provider())
	}
	return m.Mounts(ctx)
}
