package mount

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/redact"
)

// S3Filesystem is a bucket of AWS S3 or of an S3-compatible service
// (Cloudflare R2, MinIO, …), reached with path-style requests when
// Endpoint is set.
type S3Filesystem struct {
	Bucket string
	// Region is the bucket's region, e.g. "us-east-1" ("auto" for R2);
	// empty means us-east-1.
	Region string
	// AccessKeyID and SecretAccessKey authenticate requests; both or
	// neither (a public AWS bucket, read-only).
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken is the token of temporary credentials; it needs both
	// keys.
	SessionToken string
	// Endpoint is the service's URL (http or https) for S3-compatible
	// services; empty means AWS.
	Endpoint string
	// Prefix limits the filesystem to the keys under this folder
	// ("a/b"); empty means the whole bucket.
	Prefix   string
	ReadOnly bool
}

// Environment variables read by S3FromEnv.
const (
	EnvS3Bucket          = "S3_BUCKET"
	EnvS3Region          = "S3_REGION"
	EnvS3AccessKeyID     = "S3_ACCESS_KEY_ID"
	EnvS3SecretAccessKey = "S3_SECRET_ACCESS_KEY"
	EnvS3SessionToken    = "S3_SESSION_TOKEN"
	EnvS3Endpoint        = "S3_ENDPOINT"
)

// S3FromEnv returns the S3Filesystem described by the variables S3_BUCKET,
// S3_REGION, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN and
// S3_ENDPOINT, looked up with getenv (os.Getenv, usually). It fails if
// the result is not valid.
func S3FromEnv(getenv func(string) string) (*S3Filesystem, error) {
	fs := &S3Filesystem{
		Bucket:          getenv(EnvS3Bucket),
		Region:          getenv(EnvS3Region),
		AccessKeyID:     getenv(EnvS3AccessKeyID),
		SecretAccessKey: getenv(EnvS3SecretAccessKey),
		SessionToken:    getenv(EnvS3SessionToken),
		Endpoint:        getenv(EnvS3Endpoint),
	}
	return fromEnv(fs, fs.Bucket, EnvS3Bucket)
}

// Kind returns "s3".
func (fs S3Filesystem) Kind() string { return "s3" }

// String describes the filesystem without credentials, e.g.
// "s3://bucket/prefix (http://127.0.0.1:9000, read-only)".
func (fs S3Filesystem) String() string {
	return describe("s3", fs.Bucket, fs.Prefix, fs.Endpoint, fs.ReadOnly)
}

// describe is a filesystem's String: scheme://bucket/prefix, then the
// endpoint (credentials taken out of its URL) and read-only in
// parentheses.
func describe(scheme, bucket, prefix, endpoint string, readOnly bool) string {
	s := scheme + "://" + bucket
	if p := normalizePrefix(prefix); p != "" {
		s += "/" + p
	}
	var notes []string
	if endpoint != "" {
		notes = append(notes, redact.URL(endpoint))
	}
	if readOnly {
		notes = append(notes, "read-only")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

// GoString is String: %#v shows no credential either.
func (fs S3Filesystem) GoString() string { return "mount.S3Filesystem(" + fs.String() + ")" }

// s3JSON is the form of an S3Filesystem in JSON, credentials masked or not.
type s3JSON struct {
	Bucket          string `json:"bucket"`
	Region          string `json:"region,omitempty"`
	AccessKeyID     string `json:"accessKeyId,omitempty"`
	SecretAccessKey string `json:"secretAccessKey,omitempty"`
	SessionToken    string `json:"sessionToken,omitempty"`
	Endpoint        string `json:"endpoint,omitempty"`
	Prefix          string `json:"prefix,omitempty"`
	ReadOnly        bool   `json:"readOnly,omitempty"`
}

func (fs S3Filesystem) toJSON(secrets bool) s3JSON {
	j := s3JSON(fs)
	if !secrets {
		j.AccessKeyID, j.SecretAccessKey, j.SessionToken = mask(j.AccessKeyID), mask(j.SecretAccessKey), mask(j.SessionToken)
		j.Endpoint = redact.URL(j.Endpoint)
	}
	return j
}

// MarshalJSON encodes the filesystem with its credentials masked; use
// [Marshal] to keep them.
func (fs S3Filesystem) MarshalJSON() ([]byte, error) { return json.Marshal(fs.toJSON(false)) }

// LogValue is the filesystem in slog records: its String.
func (fs S3Filesystem) LogValue() slog.Value { return slog.StringValue(fs.String()) }

// hasKeys reports whether the filesystem has credentials.
func (fs S3Filesystem) hasKeys() bool { return fs.AccessKeyID != "" && fs.SecretAccessKey != "" }

// Secrets returns the credentials, for redaction: the values no log,
// error or message may show.
func (fs S3Filesystem) Secrets() []string {
	return []string{fs.SecretAccessKey, fs.SessionToken, fs.AccessKeyID}
}

// s3BucketName is the S3 rule for bucket names: 3 to 63 lower-case letters,
// digits, dots and hyphens, beginning and ending with a letter or digit.
var s3BucketName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$`) })

// Validate checks the filesystem, as Mastra does before mounting: the
// bucket name, the endpoint URL, the prefix and that the credentials come
// together.
func (fs S3Filesystem) Validate() error {
	if !s3BucketName().MatchString(fs.Bucket) {
		return invalid("S3 bucket name %q: it must be 3 to 63 lower-case letters, digits, dots or hyphens, beginning and ending with a letter or digit", fs.Bucket)
	}
	if (fs.AccessKeyID == "") != (fs.SecretAccessKey == "") {
		return invalid("S3 credentials: both the access key id and the secret access key must be given, or neither")
	}
	if fs.SessionToken != "" && !fs.hasKeys() {
		return invalid("S3 credentials: a session token needs the access key id and the secret access key")
	}
	if fs.Endpoint != "" {
		if err := checkEndpoint(fs.Endpoint); err != nil {
			return err
		}
		if !fs.hasKeys() {
			return invalid("S3-compatible storage at %s needs credentials (public buckets without credentials work only on AWS S3)", redact.URL(fs.Endpoint))
		}
	}
	if strings.ContainsAny(fs.Region, " /\\:\x00\n") {
		return invalid("S3 region %q", fs.Region)
	}
	_, err := checkPrefix(fs.Prefix)
	return err
}

// checkEndpoint checks that e is an http or https URL of a host.
func checkEndpoint(e string) error {
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("endpoint %q is not an http:// or https:// URL", redact.URL(e))
	}
	if u.User != nil {
		return invalid("endpoint %s: credentials belong in their own fields, not in the URL", redact.URL(e))
	}
	return nil
}

// mask replaces a non-empty secret with a marker.
func mask(s string) string {
	if s == "" {
		return ""
	}
	return redact.Marker
}

// normalizePrefix strips the slashes around a prefix.
func normalizePrefix(p string) string { return strings.Trim(p, "/") }

// checkPrefix returns the normalized prefix p, or why it is not valid.
func checkPrefix(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	n := normalizePrefix(p)
	if n == "" {
		return "", invalid("prefix %q is empty once its slashes are removed", p)
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", invalid("prefix %q: empty, '.' and '..' segments are not allowed", p)
		}
	}
	if strings.IndexFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "", invalid("prefix %q holds control characters", p)
	}
	return n, nil
}

// Format keeps fmt's other verbs (%v, %+v, %s, %q) from printing fields.
func (fs S3Filesystem) Format(f fmt.State, verb rune) { format(f, verb, fs.String(), fs.GoString()) }

// format is the Format of a filesystem described by s (its String) and
// goString: %q quotes s, %#v writes goString, every other verb s.
func format(f fmt.State, verb rune, s, goString string) {
	switch {
	case verb == 'q':
		fmt.Fprintf(f, "%q", s)
	case verb == 'v' && f.Flag('#'):
		_, _ = f.Write([]byte(goString))
	default:
		_, _ = f.Write([]byte(s))
	}
}

// fromEnv returns fs, read from the environment, once its bucket (named
// by the variable bucketEnv) is set and it validates.
func fromEnv[F interface{ Validate() error }](fs F, bucket, bucketEnv string) (F, error) {
	var none F
	if bucket == "" {
		return none, invalid("%s is not set", bucketEnv)
	}
	if err := fs.Validate(); err != nil {
		return none, err
	}
	return fs, nil
}
