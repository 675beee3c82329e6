package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/mount"
)

func TestBucketFilesystem(t *testing.T) {
	env := map[string]string{"S3_ACCESS_KEY_ID": "AKIAENV", "S3_SECRET_ACCESS_KEY": "env-secret", "S3_REGION": "eu-west-1", "GCS_SERVICE_ACCOUNT_KEY": `{"type":"service_account"}`}
	a := &app{cfg: Config{Getenv: func(k string) string { return env[k] }}}
	fs, err := a.bucketFilesystem("s3://data/team/a", true, "http://127.0.0.1:9000", "", "")
	if err != nil {
		t.Fatal(err)
	}
	s3 := fs.(*mount.S3Filesystem)
	if s3.Bucket != "data" || s3.Prefix != "team/a" || !s3.ReadOnly || s3.Endpoint != "http://127.0.0.1:9000" || s3.Region != "eu-west-1" || s3.SecretAccessKey != "env-secret" {
		t.Fatalf("s3 = %#v", *s3)
	}
	key := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(key, []byte("AKIAFILE:file-secret\n"), 0o600)
	fs, err = a.bucketFilesystem("s3://data", false, "", "us-east-2", key)
	if err != nil || fs.(*mount.S3Filesystem).SecretAccessKey != "file-secret" || fs.(*mount.S3Filesystem).Region != "us-east-2" {
		t.Fatalf("s3 from a credentials file: %v, %v", fs, err)
	}
	fs, err = a.bucketFilesystem("gs://my_bucket/x", false, "", "", "")
	if err != nil || string(fs.(*mount.GCSFilesystem).Credentials) != env["GCS_SERVICE_ACCOUNT_KEY"] || fs.(*mount.GCSFilesystem).Prefix != "x" {
		t.Fatalf("gcs: %v, %v", fs, err)
	}
	for _, bad := range []string{"data", "ftp://data", "s3://", "s3://UPPER", "gs://-x"} {
		_, err := a.bucketFilesystem(bad, false, "", "", "")
		var u *usageError
		if !errors.As(err, &u) {
			t.Errorf("bucketFilesystem(%q) = %v, want a usage error", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "env-secret") {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}
