package mount

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const (
	testKeyID  = "AKIAEXAMPLEKEYID"
	testSecret = "wJalrXUtnFEMI-secret-value"
	testToken  = "session-token-value-xyz"
)

var testGCSKey = `{"type":"service_account","project_id":"p","private_key_id":"keyid-0123456789","private_key":"-----BEGIN PRIVATE KEY-----\nMIIsecretbody\n-----END PRIVATE KEY-----\n","client_email":"a@p.iam.gserviceaccount.com"}`

func TestS3PlanLongLivedKeys(t *testing.T) {
	fs := S3Filesystem{Bucket: "data", Region: "us-east-1", AccessKeyID: testKeyID, SecretAccessKey: testSecret,
		Endpoint: "http://127.0.0.1:9000/", Prefix: "/team/a/", ReadOnly: true}
	p, err := NewPlan(fs, PlanOptions{MountPoint: "/srv/m", CredentialDir: "/state/c", Owner: &Owner{UID: 1000, GID: 1001}, Foreground: true, AllowOther: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "s3fs data:/team/a /srv/m -f -o passwd_file=/state/c/passwd-s3fs -o allow_other -o uid=1000 -o gid=1001 -o umask=0022 -o mp_umask=0022 -o url=http://127.0.0.1:9000 -o use_path_request_style -o sigv4 -o endpoint=us-east-1 -o ro"
	if got := strings.Join(p.Argv(), " "); got != want {
		t.Fatalf("argv:\n got %s\nwant %s", got, want)
	}
	if len(p.Files) != 1 || string(p.Files[0].Content) != testKeyID+":"+testSecret+"\n" || p.Files[0].Mode != 0o600 || p.Files[0].Transient {
		t.Fatalf("files = %+v", p.Files)
	}
	assertNoSecret(t, p.ShellCommand()+p.String()+strings.Join(p.Env, " "), testKeyID, testSecret)
	if !p.ReadOnly || p.ConfigHash != ConfigHash(fs) {
		t.Fatalf("plan = %+v", p)
	}
}

func TestS3PlanSessionToken(t *testing.T) {
	fs := &S3Filesystem{Bucket: "data", AccessKeyID: testKeyID, SecretAccessKey: "it's", SessionToken: testToken}
	p, err := NewPlan(fs, PlanOptions{MountPoint: "/m", CredentialDir: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	if p.EnvFile != "/c/credentials.env" || !p.Files[0].Transient {
		t.Fatalf("plan = %+v", p)
	}
	if want := "export AWS_SECRET_ACCESS_KEY='it'\\''s'\n"; !strings.Contains(string(p.Files[0].Content), want) {
		t.Fatalf("env file %q lacks the quoted %q", p.Files[0].Content, want)
	}
	if got := p.ShellCommand(); got != ". '/c/credentials.env' && s3fs 'data' '/m' '-o' 'use_session_token'" && got != ". /c/credentials.env && s3fs data /m -o use_session_token" {
		t.Fatalf("shell command %q", got)
	}
	assertNoSecret(t, p.ShellCommand(), testKeyID, testToken)
}

func TestS3PlanPublicBucket(t *testing.T) {
	p, err := NewPlan(S3Filesystem{Bucket: "public-data"}, PlanOptions{MountPoint: "/m", CredentialDir: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Files) != 0 || !strings.Contains(strings.Join(p.Args, " "), "public_bucket=1") {
		t.Fatalf("plan = %+v", p)
	}
}

func TestGCSPlan(t *testing.T) {
	fs := GCSFilesystem{Bucket: "my_bucket", Credentials: []byte(testGCSKey), Prefix: "a/b/", Endpoint: "http://127.0.0.1:4443/storage/v1/"}
	p, err := NewPlan(fs, PlanOptions{MountPoint: "/m", CredentialDir: "/c", Owner: &Owner{UID: 5, GID: 6}, Foreground: true, AllowOther: true, Emulator: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "gcsfuse --key-file=/c/key.json --foreground --implicit-dirs --uid=5 --gid=6 --file-mode=644 --dir-mode=755 -o allow_other --only-dir=a/b --custom-endpoint=http://127.0.0.1:4443/storage/v1/ --enable-hns=false --disable-autoconfig my_bucket /m"
	if got := strings.Join(p.Argv(), " "); got != want {
		t.Fatalf("argv:\n got %s\nwant %s", got, want)
	}
	if string(p.Files[0].Content) != testGCSKey || p.Files[0].Mode != 0o600 {
		t.Fatalf("files = %+v", p.Files)
	}
	out := p.Redact("error: key keyid-0123456789 MIIsecretbody")
	assertNoSecret(t, out, "keyid-0123456789", "MIIsecretbody")
}

func TestInvalidFilesystems(t *testing.T) {
	for _, fs := range []interface {
		Validate() error
		String() string
	}{
		S3Filesystem{Bucket: "A"},
		S3Filesystem{Bucket: "ok-bucket", AccessKeyID: "x"},
		S3Filesystem{Bucket: "ok-bucket", SessionToken: "x"},
		S3Filesystem{Bucket: "ok-bucket", Endpoint: "http://127.0.0.1:1"},
		S3Filesystem{Bucket: "ok-bucket", AccessKeyID: "a", SecretAccessKey: "b", Endpoint: "ftp://x"},
		S3Filesystem{Bucket: "ok-bucket", Prefix: "a/../b"},
		S3Filesystem{Bucket: "ok-bucket", Prefix: "//"},
		GCSFilesystem{Bucket: "-bad"},
		GCSFilesystem{Bucket: "good", Credentials: []byte("not json " + testSecret)},
	} {
		err := fs.Validate()
		if err == nil {
			t.Errorf("%s: valid", fs)
			continue
		}
		assertNoSecret(t, err.Error(), testSecret)
	}
}

func TestCredentialsNeverPrinted(t *testing.T) {
	s3 := S3Filesystem{Bucket: "b-1", AccessKeyID: testKeyID, SecretAccessKey: testSecret, SessionToken: testToken, Endpoint: "https://u:pw-secret@host/"}
	gcs := GCSFilesystem{Bucket: "b-2", Credentials: []byte(testGCSKey)}
	var logged strings.Builder
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	log.Info("m", "s3", s3, "gcs", gcs, "p", &s3)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("m", "s3", s3, "gcs", &gcs)
	j1, _ := json.Marshal(s3)
	j2, _ := json.Marshal(&gcs)
	out := fmt.Sprintf("%v %+v %#v %s %q %v %+v %#v", s3, s3, s3, &s3, s3, gcs, &gcs, gcs) + string(j1) + string(j2) + logged.String()
	assertNoSecret(t, out, testKeyID, testSecret, testToken, "pw-secret", "MIIsecretbody", "keyid-0123456789")
	if !strings.Contains(out, "s3://b-1") || !strings.Contains(out, "gs://b-2") {
		t.Fatalf("the descriptions name no bucket: %s", out)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, fs := range []any{
		&S3Filesystem{Bucket: "b-1", Region: "auto", AccessKeyID: testKeyID, SecretAccessKey: testSecret, SessionToken: testToken, Endpoint: "http://e", Prefix: "p", ReadOnly: true},
		&GCSFilesystem{Bucket: "b-2", ProjectID: "p", Credentials: []byte(testGCSKey), Prefix: "x", Endpoint: "http://e/storage/v1/"},
	} {
		f := fs.(interface {
			Kind() string
			String() string
		})
		b, err := Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if ConfigHash(back) != ConfigHash(f) || fmt.Sprintf("%#v", back) != fmt.Sprintf("%#v", f) {
			t.Fatalf("round trip of %v gave %v", f, back)
		}
		if s3, ok := back.(*S3Filesystem); ok && (s3.SecretAccessKey != testSecret || s3.SessionToken != testToken) {
			t.Fatal("credentials lost")
		}
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{"S3_BUCKET": "b-1", "S3_REGION": "eu-west-1", "S3_ACCESS_KEY_ID": testKeyID, "S3_SECRET_ACCESS_KEY": testSecret, "S3_ENDPOINT": "http://127.0.0.1:9",
		"GCS_BUCKET": "b-2", "GCS_SERVICE_ACCOUNT_KEY": testGCSKey}
	s3, err := S3FromEnv(func(k string) string { return env[k] })
	if err != nil || s3.Bucket != "b-1" || s3.Region != "eu-west-1" || s3.SecretAccessKey != testSecret || s3.Endpoint != "http://127.0.0.1:9" {
		t.Fatalf("S3FromEnv = %#v, %v", s3, err)
	}
	gcs, err := GCSFromEnv(func(k string) string { return env[k] })
	if err != nil || gcs.Bucket != "b-2" || string(gcs.Credentials) != testGCSKey {
		t.Fatalf("GCSFromEnv = %v, %v", gcs, err)
	}
	if _, err := S3FromEnv(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "S3_BUCKET") {
		t.Fatalf("S3FromEnv without S3_BUCKET: %v", err)
	}
}

func assertNoSecret(t *testing.T, s string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Fatalf("%q leaks %q", s, sec)
		}
	}
}
