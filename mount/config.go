package mount

import (
	"encoding/json"
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// stored is the form Marshal writes.
type stored struct {
	Type string   `json:"type"`
	S3   *s3JSON  `json:"s3,omitempty"`
	GCS  *gcsJSON `json:"gcs,omitempty"`
}

// Marshal encodes fs (an S3Filesystem or GCSFilesystem, or a pointer to
// one) as JSON with its credentials, for an engine to store privately
// (mode 0600) and remount from; Unmarshal decodes it.
func Marshal(fsys sandbox.Filesystem) ([]byte, error) {
	var s stored
	switch f := fsys.(type) {
	case S3Filesystem:
		j := f.toJSON(true)
		s = stored{Type: "s3", S3: &j}
	case *S3Filesystem:
		j := f.toJSON(true)
		s = stored{Type: "s3", S3: &j}
	case GCSFilesystem:
		j := f.toJSON(true)
		s = stored{Type: "gcs", GCS: &j}
	case *GCSFilesystem:
		j := f.toJSON(true)
		s = stored{Type: "gcs", GCS: &j}
	default:
		return nil, fmt.Errorf("%w: cannot store %s filesystems", sandbox.ErrUnsupported, fsys.Kind())
	}
	return json.Marshal(s)
}

// Unmarshal decodes what Marshal encoded: an *S3Filesystem or a
// *GCSFilesystem.
func Unmarshal(b []byte) (sandbox.Filesystem, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode mount configuration: %w", err)
	}
	switch {
	case s.Type == "s3" && s.S3 != nil:
		fs := S3Filesystem(*s.S3)
		return &fs, nil
	case s.Type == "gcs" && s.GCS != nil:
		j := s.GCS
		var creds []byte
		if j.Credentials != "" {
			creds = []byte(j.Credentials)
		}
		return &GCSFilesystem{Bucket: j.Bucket, ProjectID: j.ProjectID, Credentials: creds, Prefix: j.Prefix, ReadOnly: j.ReadOnly, Endpoint: j.Endpoint}, nil
	}
	return nil, fmt.Errorf("decode mount configuration: unknown type %q", s.Type)
}

// Secrets returns the credentials of fs (none for other filesystems), for
// a runner to remove from what it shows (see also Plan.Redact).
func Secrets(fsys sandbox.Filesystem) []string {
	switch f := fsys.(type) {
	case S3Filesystem:
		return f.Secrets()
	case *S3Filesystem:
		return f.Secrets()
	case GCSFilesystem:
		return f.Secrets()
	case *GCSFilesystem:
		return f.Secrets()
	}
	return nil
}
