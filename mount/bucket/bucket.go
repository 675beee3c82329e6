package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/redact"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Bucket is host-side access to the objects of a filesystem's bucket
// (under its Prefix: names are relative to it). Reads and writes stream:
// no object is held whole in memory. A missing object is an error
// matching fs.ErrNotExist.
type Bucket interface {
	// Open streams the object name; the caller closes it.
	Open(ctx context.Context, name string) (io.ReadCloser, error)
	// Create streams a new content of the object name: the object is
	// written when Close returns nil. Cancel ctx to abandon it.
	Create(ctx context.Context, name string) (io.WriteCloser, error)
	// Stat describes the object name.
	Stat(ctx context.Context, name string) (ObjectInfo, error)
	// List yields the objects whose names begin with prefix, in name
	// order, stopping at the first error.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]
	// Delete removes the object name; removing a missing object is not
	// an error.
	Delete(ctx context.Context, name string) error
	// Close releases the client.
	Close() error
}

// ObjectInfo describes an object.
type ObjectInfo struct {
	Name    string // relative to the filesystem's prefix
	Size    int64
	ModTime time.Time
}

// Open returns host-side access to the bucket of fs (an mount.S3Filesystem or a
// mount.GCSFilesystem, or a pointer to one). It makes no request; a missing
// bucket or refused credentials show at the first call, as errors
// matching mount.ErrBucketNotFound or mount.ErrAccessDenied.
func Open(ctx context.Context, fsys sandbox.Filesystem) (Bucket, error) {
	switch f := fsys.(type) {
	case mount.S3Filesystem:
		return openS3(f)
	case *mount.S3Filesystem:
		return openS3(*f)
	case mount.GCSFilesystem:
		return openGCS(ctx, f)
	case *mount.GCSFilesystem:
		return openGCS(ctx, *f)
	}
	return nil, fmt.Errorf("%w: no bucket access for %s filesystems", sandbox.ErrUnsupported, fsys.Kind())
}

// objectName returns the key of name under prefix (normalized).
func objectName(prefix, name string) (string, error) {
	name = strings.TrimPrefix(name, "/")
	if name == "" {
		return "", fmt.Errorf("%w: empty object name", mount.ErrInvalid)
	}
	if prefix == "" {
		return name, nil
	}
	return prefix + "/" + name, nil
}

// relName returns key relative to prefix.
func relName(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return strings.TrimPrefix(key, prefix+"/")
}

// explain is the error of op on the object name of the filesystem fsys,
// which failed with err: of the given kind (an error to match, nil for
// none), with the filesystem named and its credentials taken out.
func explain(op, name string, fsys interface {
	String() string
	Secrets() []string
}, kind, err error) error {
	msg := redact.Text(err.Error(), fsys.Secrets()...)
	where := fsys.String()
	if name != "" {
		where += " " + name
	}
	if kind != nil {
		return fmt.Errorf("%s %s: %w (%s)", op, where, kind, msg)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: %w", op, where, err)
	}
	return fmt.Errorf("%s %s: %s", op, where, msg)
}
