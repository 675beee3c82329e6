package daytona

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// gcsInSandbox is a fake GCS server (fake-gcs-server, in process) that a
// sandbox of agentbox serve reaches at 127.0.0.1 of its own network
// namespace, with an OAuth token endpoint for service-account keys.
type gcsInSandbox struct {
	mu  sync.Mutex
	gcs *fakestorage.Server // made once the port is known
}

func (g *gcsInSandbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		// The key's token_uri: any signed assertion gets a token.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"fake-access-token","token_type":"Bearer","expires_in":3600}`))
		return
	}
	g.mu.Lock()
	gcs := g.gcs
	g.mu.Unlock()
	if gcs == nil {
		http.Error(w, "the fake GCS server is not ready", http.StatusServiceUnavailable)
		return
	}
	gcs.HTTPHandler().ServeHTTP(w, r)
}

// serviceAccountKey returns a service-account key of a new RSA key whose
// token_uri is tokenURI.
func serviceAccountKey(t *testing.T, tokenURI string) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "test-project",
		"private_key_id": "k" + strings.ToLower(rand.Text()),
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "mounter@test-project.iam.gserviceaccount.com",
		"client_id":      "1234567890",
		"token_uri":      tokenURI,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEngineMountGCS mounts a GCS bucket with gcsfuse inside a sandbox of
// agentbox serve, as Mastra does on Daytona, against fake-gcs-server
// listening in the sandbox's network namespace, with the metadata server
// on a dead port (MountEnv): a file written in the sandbox is an object
// of the bucket, an object put in the bucket is read in the sandbox; the
// service-account key lives in a 0600 file until the unmount; the unmount
// leaves no key, marker, folder or gcsfuse process.
func TestEngineMountGCS(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	testenv.Need(t, local.FUSEAvailable(), "sandboxes cannot have FUSE here (needs /dev/fuse and root)")
	bin := testenv.NeedTool(t, "gcsfuse", "gcsfuse")
	ctx := context.Background()
	s := newServe(t, &server.Knobs{})
	g := &gcsInSandbox{}
	// The listening part of bucketInSandbox, serving g.
	ns := &bucketInSandbox{t: t, h: g}
	t.Cleanup(func() {
		ns.mu.Lock()
		defer ns.mu.Unlock()
		for _, s := range ns.srvs {
			s.Close()
		}
	})
	var sb *Sandbox
	sb = newEngine(t, s, Config{}, Options{ID: "mount-gcs",
		// Port 9 of the sandbox's loopback: nothing listens there.
		MountEnv: map[string]string{"GCE_METADATA_HOST": "127.0.0.1:9"},
		Hooks:    sandbox.Hooks{OnStart: ns.onStart(func() *Sandbox { return sb })}})
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(ns.url(), "http://")
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, Scheme: "http", PublicHost: host,
		InitialObjects: []fakestorage.Object{{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "data", Name: "team/seed.txt"}, Content: []byte("seeded")}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	g.mu.Lock()
	g.gcs = gcs
	g.mu.Unlock()

	sh := func(cmd string) string {
		t.Helper()
		res, err := sb.ExecuteCommand(ctx, cmd, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res.Stdout
	}
	// The sandbox sees the host's /usr, not the Go tools: gcsfuse goes to
	// its /usr/local/bin, where the engine finds it (no apt).
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := sb.Client().Upload(ctx, toolbox.UploadFile{Path: "/tmp/gcsfuse.upload", Content: f}); err != nil {
		t.Fatal(err)
	}
	sh(`if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; $SUDO install -m 755 /tmp/gcsfuse.upload /usr/local/bin/gcsfuse && rm -f /tmp/gcsfuse.upload`)

	key := serviceAccountKey(t, ns.url()+"/token")
	var k struct {
		PrivateKeyID string `json:"private_key_id"`
	}
	if err := json.Unmarshal(key, &k); err != nil {
		t.Fatal(err)
	}
	secret := k.PrivateKeyID
	fs := mount.GCSFilesystem{Bucket: "data", Prefix: "team", Credentials: key, Endpoint: ns.url() + "/storage/v1/"}
	const p = "/home/daytona/gcs"
	if err := sb.Mount(ctx, fs, p); err != nil {
		t.Fatalf("mount: %v", err)
	}
	if got := sh("cat " + p + "/seed.txt"); got != "seeded" {
		t.Fatalf("seed.txt through the mount: %q", got)
	}
	// Sandbox to bucket.
	sh("echo from the sandbox > " + p + "/new.txt && sync " + p + "/new.txt")
	if obj, err := gcs.GetObject("data", "team/new.txt"); err != nil || string(obj.Content) != "from the sandbox\n" {
		t.Errorf("new.txt in the bucket: %q, %v", obj.Content, err)
	}
	// Bucket to sandbox (a name the mount never looked up).
	gcs.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "data", Name: "team/back.txt"}, Content: []byte("from the bucket")})
	if got := sh("cat " + p + "/back.txt"); got != "from the bucket" {
		t.Errorf("back.txt through the mount: %q", got)
	}
	mounts := mustMounts(t, sb)
	if len(mounts) != 1 || mounts[0].Path != p || mounts[0].State != sandbox.MountMounted || mounts[0].Kind != "gcs" || strings.Contains(mounts[0].Filesystem, secret) {
		t.Errorf("Mounts: %+v", mounts)
	}
	// The key is in one file of mode 0600, nowhere else in /tmp or the
	// home; the metadata server's address reached gcsfuse.
	if got := sh("grep -rlsF " + secret + " /tmp /home | xargs -r stat -c '%a %n'"); !strings.HasPrefix(got, "600 /tmp/.agentbox-mount-") || strings.Count(got, "\n") != 1 {
		t.Errorf("files holding the key: %q", got)
	}
	pid := strings.TrimSpace(sh("pgrep -x gcsfuse"))
	if pid == "" || strings.Contains(pid, "\n") {
		t.Fatalf("gcsfuse processes: %q", pid)
	}
	if got := sh("tr '\\0' '\\n' < /proc/" + pid + "/environ | grep ^GCE_METADATA_HOST="); got != "GCE_METADATA_HOST=127.0.0.1:9\n" {
		t.Errorf("gcsfuse's GCE_METADATA_HOST: %q", got)
	}

	// Unmounted: no key, marker, folder or gcsfuse left.
	if err := sb.Unmount(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := sh("grep -rlsF " + secret + " /tmp /home; ls -d /tmp/.agentbox-mount-* " + p + " 2>/dev/null; ls /tmp/.mastra-mounts 2>/dev/null; pgrep -x gcsfuse"); got != "" {
		t.Errorf("left after the unmount: %q", got)
	}
	if m := mustMounts(t, sb); len(m) != 0 {
		t.Errorf("mounts after the unmount: %+v", m)
	}
}

// TestMountEnvInvalid: a MountEnv name that is not a variable name is
// refused by New, with ErrInvalidEnv.
func TestMountEnvInvalid(t *testing.T) {
	noDaytonaEnv(t)
	_, err := New(Options{ID: "x", Client: &Client{}, MountEnv: map[string]string{"1BAD=": "v"}})
	if !errors.Is(err, sandbox.ErrInvalidEnv) || !strings.Contains(err.Error(), "MountEnv") {
		t.Fatalf("New with a bad MountEnv name: %v", err)
	}
}
