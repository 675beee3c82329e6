package mount

import (
	"errors"
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Errors of this package, checkable with errors.Is.
var (
	// ErrInvalid: a filesystem or path is not valid. It matches
	// sandbox.ErrInvalidArgument too.
	ErrInvalid = fmt.Errorf("invalid mount configuration (%w)", sandbox.ErrInvalidArgument)
	// ErrToolNotFound: the FUSE tool of a plan (s3fs, gcsfuse) is not
	// installed.
	ErrToolNotFound = errors.New("mount tool not found")
	// ErrBucketNotFound: the bucket does not exist.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrAccessDenied: the credentials were refused.
	ErrAccessDenied = errors.New("access denied: check the credentials")
)

// invalid returns an error matching ErrInvalid that says what is wrong.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
