package mount

import (
	"errors"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestMarkerNameVectors(t *testing.T) {
	// Mastra's test vectors.
	for p, want := range map[string]string{
		"/data": "mount-ro9cp", "/s3-data": "mount-d5zyug", "/gcs-data": "mount-hs8qtr",
		"/data/retry": "mount-rw8waa", "/": "mount-1b",
	} {
		if got := MarkerName(p); got != want {
			t.Errorf("MarkerName(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestConfigHashVector(t *testing.T) {
	fs := S3Filesystem{Bucket: "test-bucket", Region: "us-east-1", AccessKeyID: "key", SecretAccessKey: "secret"}
	if got := ConfigHash(fs); got != "0f53ccdcb14e0c8c" {
		t.Fatalf("ConfigHash = %s, want Mastra's 0f53ccdcb14e0c8c", got)
	}
	rotated := fs
	rotated.SecretAccessKey = "other"
	if ConfigHash(rotated) == ConfigHash(fs) {
		t.Fatal("rotating the secret kept the hash")
	}
}

func TestParseMarker(t *testing.T) {
	p, h, ok := ParseMarker(Marker("/a|b", "0123"))
	if !ok || p != "/a|b" || h != "0123" {
		t.Fatalf("ParseMarker = %q %q %v", p, h, ok)
	}
	for _, bad := range []string{"", "|x", "/a|", "nopipe"} {
		if _, _, ok := ParseMarker(bad); ok {
			t.Errorf("ParseMarker(%q) ok", bad)
		}
	}
}

func TestValidatePath(t *testing.T) {
	for _, p := range []string{"/data", "/mnt/s3", "/home/daytona/bucket", "/tmp/x"} {
		if err := ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"", "/", "data", "/a/../b", "/a//b", "/a/./b", "/proc", "/proc/x", "/sys/fs", "/dev", "/etc/x", "/tmp", "/a b", "/a;rm"} {
		err := ValidatePath(p)
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("ValidatePath(%q) = %v, want ErrInvalid", p, err)
		}
	}
}
