package mount

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/redact"
)

// GCSFilesystem is a Google Cloud Storage bucket.
type GCSFilesystem struct {
	Bucket string
	// ProjectID is the bucket's project; optional for reads and writes.
	ProjectID string
	// Credentials is a service-account key (the JSON file Google issues);
	// empty means anonymous access (public buckets, read-only).
	Credentials []byte
	// Prefix limits the filesystem to the objects under this folder
	// ("a/b"); empty means the whole bucket.
	Prefix   string
	ReadOnly bool
	// Endpoint is the storage API's URL, for emulators (e.g.
	// "http://127.0.0.1:4443/storage/v1/"); empty means Google's.
	Endpoint string
}

// Environment variables read by GCSFromEnv.
const (
	EnvGCSBucket            = "GCS_BUCKET"
	EnvGCSServiceAccountKey = "GCS_SERVICE_ACCOUNT_KEY"
	EnvGCSProjectID         = "GCS_PROJECT_ID"
	EnvGCSEndpoint          = "GCS_ENDPOINT"
)

// GCSFromEnv returns the GCSFilesystem described by the variables
// GCS_BUCKET, GCS_SERVICE_ACCOUNT_KEY (the key's JSON), GCS_PROJECT_ID and
// GCS_ENDPOINT, looked up with getenv (os.Getenv, usually). It fails if
// the result is not valid.
func GCSFromEnv(getenv func(string) string) (*GCSFilesystem, error) {
	fs := &GCSFilesystem{
		Bucket:      getenv(EnvGCSBucket),
		Credentials: []byte(getenv(EnvGCSServiceAccountKey)),
		ProjectID:   getenv(EnvGCSProjectID),
		Endpoint:    getenv(EnvGCSEndpoint),
	}
	if len(fs.Credentials) == 0 {
		fs.Credentials = nil
	}
	return fromEnv(fs, fs.Bucket, EnvGCSBucket)
}

// Kind returns "gcs".
func (fs GCSFilesystem) Kind() string { return "gcs" }

// String describes the filesystem without credentials, e.g.
// "gs://bucket/prefix (read-only)".
func (fs GCSFilesystem) String() string {
	return describe("gs", fs.Bucket, fs.Prefix, fs.Endpoint, fs.ReadOnly)
}

// GoString is String: %#v shows no credential either.
func (fs GCSFilesystem) GoString() string { return "mount.GCSFilesystem(" + fs.String() + ")" }

// Format keeps fmt's other verbs (%v, %+v, %s, %q) from printing fields.
func (fs GCSFilesystem) Format(f fmt.State, verb rune) { format(f, verb, fs.String(), fs.GoString()) }

// LogValue is the filesystem in slog records: its String.
func (fs GCSFilesystem) LogValue() slog.Value { return slog.StringValue(fs.String()) }

// gcsJSON is the form of a GCSFilesystem in JSON.
type gcsJSON struct {
	Bucket      string `json:"bucket"`
	ProjectID   string `json:"projectId,omitempty"`
	Credentials string `json:"serviceAccountKey,omitempty"`
	Prefix      string `json:"prefix,omitempty"`
	ReadOnly    bool   `json:"readOnly,omitempty"`
	Endpoint    string `json:"endpoint,omitempty"`
}

func (fs GCSFilesystem) toJSON(secrets bool) gcsJSON {
	j := gcsJSON{Bucket: fs.Bucket, ProjectID: fs.ProjectID, Credentials: string(fs.Credentials), Prefix: fs.Prefix, ReadOnly: fs.ReadOnly, Endpoint: fs.Endpoint}
	if !secrets {
		j.Credentials = mask(j.Credentials)
		j.Endpoint = redact.URL(j.Endpoint)
	}
	return j
}

// MarshalJSON encodes the filesystem with its credentials masked; use
// [Marshal] to keep them.
func (fs GCSFilesystem) MarshalJSON() ([]byte, error) { return json.Marshal(fs.toJSON(false)) }

// Secrets returns the credentials, for redaction: the key and its private
// key (which may appear alone, escaped or not).
func (fs GCSFilesystem) Secrets() []string {
	if len(fs.Credentials) == 0 {
		return nil
	}
	out := []string{string(fs.Credentials)}
	var k struct {
		PrivateKey   string `json:"private_key"`
		PrivateKeyID string `json:"private_key_id"`
	}
	if json.Unmarshal(fs.Credentials, &k) == nil {
		out = append(out, k.PrivateKey, k.PrivateKeyID)
		// Each line of the key's body, should a tool print part of it.
		for _, line := range strings.Split(k.PrivateKey, "\n") {
			if len(line) >= 8 && !strings.HasPrefix(line, "-----") {
				out = append(out, line)
			}
		}
		if b, err := json.Marshal(k.PrivateKey); err == nil && len(b) > 2 {
			out = append(out, string(b[1:len(b)-1]))
		}
	}
	return out
}

// gcsBucketName is Google's rule for bucket names (without dots' 222-byte
// form): 3 to 63 lower-case letters, digits, dots, hyphens and
// underscores, beginning and ending with a letter or digit.
var gcsBucketName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._\-]{1,61}[a-z0-9]$`) })

// Validate checks the bucket name, the key (JSON of a service account),
// the endpoint and the prefix.
func (fs GCSFilesystem) Validate() error {
	if !gcsBucketName().MatchString(fs.Bucket) {
		return invalid("GCS bucket name %q: it must be 3 to 63 lower-case letters, digits, dots, hyphens or underscores, beginning and ending with a letter or digit", fs.Bucket)
	}
	if len(fs.Credentials) > 0 {
		var k struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(fs.Credentials, &k); err != nil || k.Type == "" {
			return invalid("GCS credentials are not a service-account key (the JSON file with \"type\": \"service_account\")")
		}
	}
	if fs.Endpoint != "" {
		if err := checkEndpoint(fs.Endpoint); err != nil {
			return err
		}
	}
	_, err := checkPrefix(fs.Prefix)
	return err
}
