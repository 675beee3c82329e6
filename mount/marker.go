package mount

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// ConfigHash identifies the configuration of fs, credentials included,
// as Mastra's MountManager does: the first 16 hex digits of the SHA-256 of
// the compact JSON of its mount config with sorted keys. Rotating a key
// changes it. fs that is neither an S3Filesystem nor a GCSFilesystem
// hashes its Kind and String.
func ConfigHash(fsys sandbox.Filesystem) string {
	var cfg map[string]any
	switch f := fsys.(type) {
	case S3Filesystem:
		cfg = f.mountConfig()
	case *S3Filesystem:
		cfg = f.mountConfig()
	case GCSFilesystem:
		cfg = f.mountConfig()
	case *GCSFilesystem:
		cfg = f.mountConfig()
	default:
		cfg = map[string]any{"type": fsys.Kind(), "id": fsys.String()}
	}
	b, _ := json.Marshal(cfg) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// mountConfig is Mastra's DaytonaS3MountConfig of fs.
func (fs S3Filesystem) mountConfig() map[string]any {
	m := map[string]any{"type": "s3", "bucket": fs.Bucket, "region": fs.Region}
	if fs.Region == "" {
		m["region"] = "us-east-1"
	}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("endpoint", fs.Endpoint)
	if fs.hasKeys() {
		set("accessKeyId", fs.AccessKeyID)
		set("secretAccessKey", fs.SecretAccessKey)
		set("sessionToken", fs.SessionToken)
	}
	if p := normalizePrefix(fs.Prefix); p != "" {
		m["prefix"] = p + "/"
	}
	if fs.ReadOnly {
		m["readOnly"] = true
	}
	return m
}

// mountConfig is Mastra's DaytonaGCSMountConfig of fs (plus readOnly and
// endpoint, which Mastra does not mount with).
func (fs GCSFilesystem) mountConfig() map[string]any {
	m := map[string]any{"type": "gcs", "bucket": fs.Bucket}
	if len(fs.Credentials) > 0 {
		m["serviceAccountKey"] = string(fs.Credentials)
	}
	if p := normalizePrefix(fs.Prefix); p != "" {
		m["prefix"] = p
	}
	if fs.ReadOnly {
		m["readOnly"] = true
	}
	if fs.Endpoint != "" {
		m["endpoint"] = fs.Endpoint
	}
	return m
}

// MarkerName returns the file name of the marker of a mount at path, as
// Mastra's markerFilename: "mount-" and the base-36 absolute value of a
// 31-multiplier hash of its UTF-16 code units (e.g. "/data" →
// "mount-ro9cp").
func MarkerName(path string) string {
	var h int32
	for _, c := range utf16.Encode([]rune(path)) {
		h = h*31 + int32(c)
	}
	return "mount-" + strconv.FormatInt(int64(math.Abs(float64(h))), 36)
}

// Marker returns the content of the marker of a mount at path: "path|hash".
func Marker(path, configHash string) string { return path + "|" + configHash }

// ParseMarker splits marker content at its last '|'; ok is false unless
// both parts are non-empty.
func ParseMarker(content string) (path, configHash string, ok bool) {
	content = strings.TrimSpace(content)
	i := strings.LastIndexByte(content, '|')
	if i <= 0 || i == len(content)-1 {
		return "", "", false
	}
	return content[:i], content[i+1:], true
}

// safePath is Mastra's rule for mount paths.
var safePath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/[A-Za-z0-9_.\-/]+$`) })

// ValidatePath checks that p is a safe mount path: absolute, of letters,
// digits, '_', '.', '-' and '/', without empty, '.' or '..' segments, and
// not "/" or a system folder (/proc, /sys, /dev, /etc, /usr, /bin, /sbin,
// /lib*, /boot, /run, /var, /tmp itself).
func ValidatePath(p string) error {
	if !safePath().MatchString(p) {
		return invalid("mount path %q must be an absolute path of letters, digits, '-', '.', '_' and '/' only (and not /)", p)
	}
	clean := strings.TrimSuffix(p, "/")
	for _, seg := range strings.Split(clean[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return invalid("mount path %q: empty, '.' and '..' segments are not allowed", p)
		}
	}
	top := strings.SplitN(clean[1:], "/", 2)[0]
	switch top {
	case "proc", "sys", "dev", "etc", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot", "run", "var":
		return invalid("mount path %q is in the system folder /%s: mount under /mnt, /data, the home or another folder of your own", p, top)
	}
	if clean == "/tmp" {
		return invalid("mount path %q would hide /tmp: mount in a folder of it instead", p)
	}
	return nil
}
