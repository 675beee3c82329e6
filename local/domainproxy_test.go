//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The DomainAllowList probes. Every request goes to a server the test
// starts on the host's loopback; the sandboxes' egress proxies resolve
// the made-up names below to it (or to the metadata address, which is
// never dialled), and only the "open" sandbox's proxy may reach loopback
// at all.

// testHosts is the made-up DNS of the proxies.
var testHosts = map[string]string{
	"allowed.test":  "127.0.0.1",
	"a.wild.test":   "127.0.0.1",
	"other.test":    "127.0.0.1",
	"rebind.test":   "127.0.0.1",
	"metadata.test": "169.254.169.254",
}

// domainSandbox returns a started sandbox with the allow list allow, whose
// proxy resolves testHosts and reaches loopback when allowNonPublic.
func domainSandbox(t *testing.T, allow string, allowNonPublic bool) *local.Sandbox {
	t.Helper()
	testenv.Need(t, haveCurl(), "curl is not installed: the probes run it inside the sandbox")
	sb := openSandbox(t, local.Options{Config: local.Config{Network: netPolicy(t, false, "", allow)}})
	local.SetEgressTestHooks(sb, testHosts, allowNonPublic)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return sb
}

func haveCurl() bool {
	_, err := exec.LookPath("curl")
	return err == nil
}

// originServer starts an HTTP server on the host's loopback that tells
// what it got, and returns its port.
func originServer(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "origin %s host=%s", r.URL.Path, r.Host)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// curl runs curl with args in sb and returns its exit code and output
// (stdout, then stderr).
func curl(t *testing.T, sb *local.Sandbox, args string) (int, string) {
	t.Helper()
	r := run(t, sb, "curl -sS --max-time 10 "+args+" 2>&1")
	return r.ExitCode, r.Stdout
}

// policyLog waits until Info's policy log of sb mentions want, and
// returns it.
func policyLog(t *testing.T, sb *local.Sandbox, want string) string {
	t.Helper()
	var log string
	if !poll(5*time.Second, func() bool {
		info, err := sb.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		log = ""
		for _, r := range info.Network.PolicyLog {
			log += fmt.Sprintf("%s %s:%d: %s\n", r.Protocol, r.Host, r.Port, r.Reason)
		}
		return strings.Contains(log, want)
	}) {
		t.Errorf("the policy log does not say %q:\n%s", want, log)
	}
	return log
}

func TestDomainAllowList(t *testing.T) {
	port := originServer(t)
	sb := domainSandbox(t, "allowed.test,*.wild.test", true)
	url := "http://allowed.test:" + port

	t.Run("proxy-environment", func(t *testing.T) {
		got := mustRun(t, sb, `echo "$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy $ALL_PROXY $NO_PROXY"`)
		want := "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:3128 localhost,127.0.0.1,::1\n"
		if got != want {
			t.Errorf("proxy variables %q, want %q", got, want)
		}
	})
	t.Run("allowed-http", func(t *testing.T) {
		if code, out := curl(t, sb, url+"/a"); code != 0 || out != "origin /a host=allowed.test:"+port {
			t.Errorf("exit %d: %q", code, out)
		}
	})
	t.Run("allowed-connect", func(t *testing.T) {
		if code, out := curl(t, sb, "-p "+url+"/b"); code != 0 || out != "origin /b host=allowed.test:"+port {
			t.Errorf("exit %d: %q", code, out)
		}
	})
	t.Run("allowed-socks5h", func(t *testing.T) {
		if code, out := curl(t, sb, "--proxy socks5h://127.0.0.1:3128 http://a.wild.test:"+port+"/c"); code != 0 || out != "origin /c host=a.wild.test:"+port {
			t.Errorf("exit %d: %q", code, out)
		}
	})
	t.Run("allowed-ipv6-bridge", func(t *testing.T) {
		if out := mustRun(t, sb, "cat /proc/net/if_inet6"); !strings.Contains(out, "lo") {
			t.Skip("no IPv6 on loopback in this kernel")
		}
		if code, out := curl(t, sb, "--proxy 'http://[::1]:3128' "+url+"/d"); code != 0 || out != "origin /d host=allowed.test:"+port {
			t.Errorf("exit %d: %q", code, out)
		}
	})
	t.Run("unlisted-http", func(t *testing.T) {
		code, out := curl(t, sb, "-w ' %{http_code}' http://other.test:"+port+"/")
		if code != 0 || out != "other.test is not on the sandbox's domain allow list\n 403" {
			t.Errorf("exit %d: %q", code, out)
		}
	})
	t.Run("unlisted-connect", func(t *testing.T) {
		if code, out := curl(t, sb, "-p http://other.test:"+port+"/"); code != 56 || !strings.Contains(out, "403") {
			t.Errorf("exit %d: %q, want curl's 56 (CONNECT refused with 403)", code, out)
		}
	})
	t.Run("unlisted-socks5h", func(t *testing.T) {
		if code, out := curl(t, sb, "--proxy socks5h://127.0.0.1:3128 http://other.test:"+port+"/"); code != 97 || !strings.Contains(out, "(2)") {
			t.Errorf("exit %d: %q, want curl's 97 with SOCKS5 reply 2 (not allowed by ruleset)", code, out)
		}
		log := policyLog(t, sb, "socks5 other.test:"+port+": other.test is not on the sandbox's domain allow list")
		for _, proto := range []string{"http other.test", "connect other.test"} {
			if !strings.Contains(log, proto) {
				t.Errorf("the policy log lacks %q:\n%s", proto, log)
			}
		}
	})
	t.Run("ip-literals", func(t *testing.T) {
		// curl exits 0 with the proxy's 403 body, 56 when a CONNECT is
		// refused, 97 when SOCKS5 is.
		for _, c := range []struct {
			args, want string
			code       int
		}{
			{"http://127.0.0.1:" + port + "/", "127.0.0.1 is an IP address, not a name", 0},
			{"http://2130706433:" + port + "/", "is an IP address, not a name", 0},
			{"-g http://[::1]:" + port + "/", "::1 is an IP address, not a name", 0},
			{"-p http://127.0.0.1:" + port + "/", "403", 56},
			{"-g --proxy socks5h://127.0.0.1:3128 http://[::ffff:127.0.0.1]:" + port + "/", "(2)", 97},
		} {
			code, out := curl(t, sb, "--noproxy '' "+c.args)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Errorf("%s: exit %d: %q, want %d and %q", c.args, code, out, c.code, c.want)
			}
		}
		policyLog(t, sb, "is an IP address, not a name")
	})
	t.Run("spoofed-host", func(t *testing.T) {
		code, out := curl(t, sb, "-H 'Host: other.test' "+url+"/")
		if code != 0 || !strings.Contains(out, "the Host header other.test does not name the host of the URL") {
			t.Errorf("absolute URI: exit %d: %q", code, out)
		}
		code, out = curl(t, sb, "-p -H 'Host: other.test' "+url+"/")
		if code != 0 || !strings.Contains(out, "a request inside the tunnel to allowed.test names other.test") {
			t.Errorf("in a tunnel: exit %d: %q", code, out)
		}
	})
	t.Run("relayed-connect", func(t *testing.T) {
		// A CONNECT to an unlisted name sent inside a tunnel to an allowed
		// one: the proxy reads it as the tunnel's first request.
		script := `exec 3<>/dev/tcp/127.0.0.1/3128
printf 'CONNECT allowed.test:` + port + ` HTTP/1.1\r\n\r\n' >&3
head -c 39 <&3; echo
printf 'CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n' >&3
timeout 5 cat <&3`
		out := mustRun(t, sb, script)
		if !strings.HasPrefix(out, "HTTP/1.1 200 Connection established") || !strings.Contains(out, "HTTP/1.1 403 Forbidden") || !strings.Contains(out, "a request inside the tunnel to allowed.test names other.test") {
			t.Errorf("relayed CONNECT: %q", out)
		}
	})
	t.Run("no-direct-route", func(t *testing.T) {
		// The host's loopback server is not the sandbox's loopback; no
		// other address has a route.
		for _, addr := range []string{"127.0.0.1/" + port, "192.0.2.1/80"} {
			r := run(t, sb, "timeout 5 bash -c 'exec 3<>/dev/tcp/"+addr+"' 2>&1")
			if r.ExitCode == 0 || !strings.Contains(r.Stdout, "refused") && !strings.Contains(r.Stdout, "unreachable") {
				t.Errorf("direct %s: exit %d %q", addr, r.ExitCode, r.Stdout)
			}
		}
		if out := mustRun(t, sb, "tail -n +2 /proc/net/route | wc -l; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"); out != "0\nlo\n" {
			t.Errorf("routes and interfaces: %q, want no IPv4 route and only lo", out)
		}
		if code, out := curl(t, sb, "--noproxy '*' "+url+"/"); code != 6 {
			t.Errorf("without the proxy: exit %d %q, want curl's 6 (could not resolve)", code, out)
		}
	})
	t.Run("no-dns", func(t *testing.T) {
		r := run(t, sb, "getent hosts allowed.test; echo rc=$?; timeout 5 bash -c 'echo q > /dev/udp/192.0.2.53/53' 2>&1")
		if !strings.Contains(r.Stdout, "rc=2") || !strings.Contains(r.Stdout, "Network is unreachable") {
			t.Errorf("name lookup or UDP inside: %q", r.Stdout)
		}
		if ns := resolvConfServer(); ns != "" && !strings.HasPrefix(ns, "127.") {
			r := run(t, sb, "timeout 5 bash -c 'echo q > /dev/udp/"+ns+"/53' 2>&1")
			if !strings.Contains(r.Stdout, "Network is unreachable") {
				t.Errorf("UDP to the host's resolver %s: %q", ns, r.Stdout)
			}
		}
	})
	t.Run("info-and-instructions", func(t *testing.T) {
		info, err := sb.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := info.Network
		if n.Mode != sandbox.NetworkDomainAllowList || strings.Join(n.DomainAllowList, ",") != "allowed.test,*.wild.test" || n.Note != "" {
			t.Errorf("Info network: %+v", n)
		}
		if n.RefusedConnections < 5 || len(n.PolicyLog) < 5 {
			t.Errorf("refusals %d, policy log %+v", n.RefusedConnections, n.PolicyLog)
		}
		if ins := sb.Instructions(); !strings.Contains(ins, "Network access is limited to these domains: allowed.test, *.wild.test") {
			t.Errorf("Instructions: %s", ins)
		}
		// Another process finds the same by id.
		found, err := localtest.Lookup(context.Background(), sb.StateDir(), sb.ID())
		if err != nil || !reflect.DeepEqual(found.Network, n) {
			t.Errorf("Lookup: %v %v", err, found)
		}
	})
}

// resolvConfServer returns the first nameserver of the host's
// /etc/resolv.conf, or "".
func resolvConfServer() string {
	b, _ := os.ReadFile("/etc/resolv.conf")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "nameserver" && !strings.Contains(f[1], ":") {
			return f[1]
		}
	}
	return ""
}

// TestDomainAllowListRebinding: by default an allowed name that resolves
// to an internal address reaches nothing.
func TestDomainAllowListRebinding(t *testing.T) {
	port := originServer(t)
	sb := domainSandbox(t, "rebind.test,metadata.test", false)
	for name, what := range map[string]string{
		"rebind.test":   "127.0.0.1 is a loopback address",
		"metadata.test": "169.254.169.254 is a link-local address",
	} {
		code, out := curl(t, sb, "-w ' %{http_code}' http://"+name+":"+port+"/")
		if code != 0 || !strings.Contains(out, what) || !strings.HasSuffix(out, " 403") {
			t.Errorf("%s: exit %d %q", name, code, out)
		}
	}
	policyLog(t, sb, "metadata.test resolves only to non-public addresses")
}

// TestEgressProxyLifetime: the state dir's shared proxy runs outside the
// sandbox's namespaces (as nobody when root), ends with the last sandbox
// it serves, whoever stops it and however, and a restart brings a new
// one.
func TestEgressProxyLifetime(t *testing.T) {
	port := originServer(t)
	sb := domainSandbox(t, "allowed.test", true)
	pid := local.EgressProxyPID(sb)
	if pid == 0 {
		t.Fatal("no egress proxy recorded")
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if got := strings.ReplaceAll(string(cmdline), "\x00", " "); got != "agentbox-netproxy " {
		t.Errorf("helper command line %q", got)
	}
	for _, ns := range []string{"net", "user", "mnt", "pid"} {
		host, _ := os.Readlink("/proc/self/ns/" + ns)
		helper, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
		if helper != host {
			t.Errorf("the helper is in namespace %s, not the host's %s", helper, host)
		}
	}
	if os.Geteuid() == 0 {
		// The helper sets no_new_privs first thing, maybe not yet.
		var status []byte
		if !poll(5*time.Second, func() bool {
			status, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			return strings.Contains(string(status), "NoNewPrivs:\t1")
		}) || !strings.Contains(string(status), "Uid:\t65534\t65534\t65534\t65534") || !strings.Contains(string(status), "CapEff:\t0000000000000000") {
			t.Errorf("helper credentials:\n%s", status)
		}
	}
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Errorf("the helper %d outlived Stop", pid)
	}
	// The next command restarts the sandbox, with a new helper that
	// continues the policy log.
	if code, out := curl(t, sb, "http://allowed.test:"+port+"/"); code != 0 || !strings.HasPrefix(out, "origin") {
		t.Errorf("after a restart: exit %d %q", code, out)
	}
	pid2 := local.EgressProxyPID(sb)
	if pid2 == 0 || pid2 == pid {
		t.Errorf("helper after the restart: %d (before: %d)", pid2, pid)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid2) {
		t.Errorf("the helper %d outlived Destroy", pid2)
	}
}

// TestEgressProxyEndsWithIdleInit: an init that stops itself when idle
// takes the proxy along when it was the last one it served, with no host
// process involved. (The interval leaves a race-enabled build time to
// start the proxy before the sandbox idles.)
func TestEgressProxyEndsWithIdleInit(t *testing.T) {
	testenv.Need(t, haveCurl(), "curl is not installed")
	sb := openSandbox(t, local.Options{Config: local.Config{Network: netPolicy(t, false, "", "allowed.test"), AutoStopInterval: 1500 * time.Millisecond}})
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := local.EgressProxyPID(sb)
	if pid == 0 {
		t.Fatal("no egress proxy recorded")
	}
	waitAutoStop(t, sb)
	if !processGone(pid) {
		t.Errorf("the helper %d outlived its idle init", pid)
	}
}

// TestEgressProxyShared: one proxy process serves every sandbox of a
// state dir that has a domain list, each with its own list and its own
// policy log; when it dies, the next command starts a new one that
// serves them all again on their sandboxes' same listening sockets (the
// inits keep them), and it exits with the last sandbox.
func TestEgressProxyShared(t *testing.T) {
	port := originServer(t)
	one := domainSandbox(t, "allowed.test", true)
	testenv.Need(t, haveCurl(), "curl is not installed")
	two := openSandbox(t, local.Options{StateDir: one.StateDir(), Config: local.Config{Network: netPolicy(t, false, "", "other.test")}})
	local.SetEgressTestHooks(two, testHosts, true)
	if _, err := two.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := local.EgressProxyPID(one)
	if pid == 0 || local.EgressProxyPID(two) != pid {
		t.Fatalf("egress proxies: %d and %d, want one shared", pid, local.EgressProxyPID(two))
	}
	check := func(when string) {
		t.Helper()
		if code, out := curl(t, one, "http://allowed.test:"+port+"/1"); code != 0 || out != "origin /1 host=allowed.test:"+port {
			t.Errorf("%s: one, allowed.test: exit %d %q", when, code, out)
		}
		if code, out := curl(t, one, "-w ' %{http_code}' http://other.test:"+port+"/"); code != 0 || !strings.HasSuffix(out, " 403") {
			t.Errorf("%s: one, other.test: exit %d %q, want 403", when, code, out)
		}
		if code, out := curl(t, two, "-w ' %{http_code}' http://allowed.test:"+port+"/"); code != 0 || !strings.HasSuffix(out, " 403") {
			t.Errorf("%s: two, allowed.test: exit %d %q, want 403", when, code, out)
		}
	}
	check("shared")
	if code, out := curl(t, two, "http://other.test:"+port+"/2"); code != 0 || out != "origin /2 host=other.test:"+port {
		t.Errorf("two, other.test: exit %d %q", code, out)
	}
	policyLog(t, one, "other.test is not on the sandbox's domain allow list")
	if log := policyLog(t, two, "allowed.test is not on the sandbox's domain allow list"); strings.Contains(log, "other.test") {
		t.Errorf("two's policy log has one's refusal:\n%s", log)
	}

	// The proxy dies: the next command of either starts a new one, which
	// serves both (two without its test resolver: only refusals).
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Fatalf("the proxy %d survived SIGKILL", pid)
	}
	check("after the proxy died")
	pid2 := local.EgressProxyPID(one)
	if pid2 == 0 || pid2 == pid || local.EgressProxyPID(two) != pid2 {
		t.Errorf("egress proxies after the restart: %d and %d (before: %d)", pid2, local.EgressProxyPID(two), pid)
	}
	info, err := two.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Network.RefusedConnections < 2 || strings.Contains(info.Network.Note, "egress proxy") {
		t.Errorf("two after the restart: %d refusals, note %q", info.Network.RefusedConnections, info.Network.Note)
	}

	// It serves two until two stops, then ends with one.
	if err := one.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if local.EgressProxyPID(two) != pid2 {
		t.Errorf("the proxy stopped serving two when one stopped")
	}
	if err := two.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid2) {
		t.Errorf("the proxy %d outlived the last sandbox it served", pid2)
	}
}

// processGone waits until pid has ended (and been reaped, by us or by
// init), failing after 10s.
func processGone(pid int) bool {
	return poll(10*time.Second, func() bool {
		reapZombie(pid)
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || !strings.Contains(string(stat), "agentbox-netpr")
	})
}

// TestDomainAllowListBadInput: malformed lists and mode conflicts are
// refused (by sandbox.ParseNetworkPolicy, the one parser, or by New),
// before anything is created.
func TestDomainAllowListBadInput(t *testing.T) {
	var many []string
	for i := 0; i <= 100; i++ {
		many = append(many, fmt.Sprintf("h%d.example", i))
	}
	for _, c := range []struct {
		domains  string
		blockAll bool
		says     string
	}{
		{"example.com,bad domain.com", false, "not allowed in a name"},
		{"10.0.0.0/8", false, "CIDR"},
		{"192.168.1.1", false, "IP address"},
		{"https://example.com", false, "not a URL"},
		{"*", false, "bare *"},
		{"a.*.example.com", false, "whole first label"},
		{"bücher.de", false, "punycode"},
		{strings.Repeat("a", 64) + ".com", false, "63"},
		{strings.Join(many, ","), false, "more than 100 entries"},
		{" , ", false, "names no domain"},
		{"example.com", true, "two network modes"},
	} {
		stateDir := t.TempDir()
		p, err := sandbox.ParseNetworkPolicy(c.blockAll, "", c.domains)
		if err == nil {
			_, err = local.New(local.Options{StateDir: stateDir, Config: local.Config{Network: p}})
		}
		if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%.60q: %v, want ErrInvalidArgument saying %q", c.domains, err, c.says)
		}
		if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
			t.Errorf("%.60q: New left %v", c.domains, ents)
		}
	}
	// A good list is stored in canonical form, also when the policy is
	// built by hand.
	for _, p := range []sandbox.NetworkPolicy{
		netPolicy(t, false, "", " Example.COM. ,*.Example.org,example.com"),
		{Mode: sandbox.NetworkAllowList, Domains: []string{" Example.COM. ", "*.Example.org", "example.com"}},
	} {
		sb, err := local.New(local.Options{StateDir: t.TempDir(), Config: local.Config{Network: p}})
		if err != nil {
			t.Fatal(err)
		}
		info, _ := sb.Info(context.Background())
		if got := strings.Join(info.Network.DomainAllowList, ","); got != "example.com,*.example.org" {
			t.Errorf("stored list %q", got)
		}
	}
}
