//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Network escape probes. Every packet goes to the test's own lab
// (netlab_test.go) or to this host's own addresses, never out of the
// machine (the lab checks its routes first; TestNetworkHostUplink checks
// that the host routes its targets to itself). Each probe asserts
// containment and proves that it really ran: the same connection
// succeeds from elsewhere (the lab's host or internet, another mode).

// addrPort formats a and port for a probe.
func addrPort(a netip.Addr, port int) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(port))
}

// linkAddrs returns the gateway and sandbox IPv4 addresses of sb's link.
func linkAddrs(t testing.TB, sb *local.Sandbox) (gw, own netip.Addr) {
	t.Helper()
	n := local.NetworkLink(sb)
	if n == 0 {
		t.Fatal("the sandbox has no link")
	}
	base := netip.MustParseAddr("10.231.0.0").As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(n)*4
	at := func(off uint32) netip.Addr {
		x := v + off
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	return at(1), at(2)
}

// spawnProbe starts probe name in sb in the background and waits until it
// printed want.
func spawnProbe(t testing.TB, sb *local.Sandbox, want, name string, args ...string) sandbox.Process {
	t.Helper()
	p, err := sb.Processes().Spawn(context.Background(), probeCommand(name, args...), &sandbox.ExecOptions{Timeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(context.Background()) })
	if !poll(10*time.Second, func() bool { return strings.Contains(p.Stdout(), want) }) {
		t.Fatalf("probe %s %v did not say %q: %q %q", name, args, want, p.Stdout(), p.Stderr())
	}
	return p
}

// refusedTCP is the answer of the firewall to a TCP connection: a reset.
const refusedTCP = "ECONNREFUSED"

func TestNetworkPublic(t *testing.T) {
	lab := newNetLab(t)
	sb := lab.sandbox(t, local.Config{})
	other := lab.sandbox(t, local.Config{})
	port := lab.Port
	tcp := func(t *testing.T, a netip.Addr) string { return runProbe(t, sb, "tcp", addrPort(a, port)) }

	t.Run("public-ipv4", func(t *testing.T) {
		if got := tcp(t, labPublic4); got != "ok" {
			t.Errorf("%s: %s, want ok", labPublic4, got)
		}
	})
	t.Run("public-ipv6", func(t *testing.T) {
		if got := tcp(t, labPublic6); got != "ok" {
			t.Errorf("%s: %s, want ok", labPublic6, got)
		}
	})
	for what, a := range labPrivate {
		t.Run("private-"+what, func(t *testing.T) {
			if got := tcp(t, a); got != refusedTCP {
				t.Errorf("%s (%s): %s, want %s (a reset by the firewall)", a, what, got, refusedTCP)
			}
			if g, err := lab.dial(addrPort(a, port)); err != nil || g != "hello from "+a.String() {
				t.Errorf("control: the lab's host reaching %s: %q %v", a, g, err)
			}
		})
	}
	for _, a := range []netip.Addr{labHost4, labHost6} {
		t.Run("host-address-"+a.String(), func(t *testing.T) {
			if got := tcp(t, a); got != refusedTCP {
				t.Errorf("the host's own address %s: %s, want %s", a, got, refusedTCP)
			}
			if g, err := lab.dial(addrPort(a, port)); err != nil || g != "hello from "+a.String() {
				t.Errorf("control: the host reaching its own %s: %q %v", a, g, err)
			}
		})
	}
	t.Run("gateway", func(t *testing.T) {
		gw, _ := linkAddrs(t, sb)
		if got := tcp(t, gw); got != refusedTCP {
			t.Errorf("the gateway %s: %s, want %s", gw, got, refusedTCP)
		}
		if g, err := lab.dial(addrPort(gw, port)); err != nil || g != "hello from "+gw.String() {
			t.Errorf("control: the host reaching %s: %q %v", gw, g, err)
		}
	})
	t.Run("link-local-gateway", func(t *testing.T) {
		h := nlHandle(t, lab.uplink)
		l, err := h.LinkByName("agentbox" + strconv.Itoa(local.NetworkLink(sb)))
		must(t, err)
		addrs, err := h.AddrList(l, netlink.FAMILY_V6)
		must(t, err)
		var ll netip.Addr
		for _, a := range addrs {
			if x, _ := netip.AddrFromSlice(a.IP); x.IsLinkLocalUnicast() {
				ll = x
			}
		}
		if !ll.IsValid() {
			t.Fatal("the host end of the link has no link-local address")
		}
		// Refused; the kernel cannot route the reset to a link-local
		// address, so the connection times out instead.
		if got := runProbe(t, sb, "tcp", addrPort(ll.WithZone("eth0"), port)); got != refusedTCP && got != "ETIMEDOUT" {
			t.Errorf("the gateway's link-local %s: %s, want %s or ETIMEDOUT", ll, got, refusedTCP)
		}
		if g, err := lab.dial(addrPort(ll.WithZone(l.Attrs().Name), port)); err != nil || !strings.HasPrefix(g, "hello from fe80") {
			t.Errorf("control: the host reaching %s: %q %v", ll, g, err)
		}
	})
	t.Run("host-loopback", func(t *testing.T) {
		// The lab's host serves on its loopback too: the sandbox's
		// 127.0.0.1 is its own.
		if got := tcp(t, netip.MustParseAddr("127.0.0.1")); got != refusedTCP {
			t.Errorf("127.0.0.1:%d: %s, want %s (nothing listens on the sandbox's own loopback)", port, got, refusedTCP)
		}
		if g, err := lab.dial(addrPort(netip.MustParseAddr("127.0.0.1"), port)); err != nil || g != "hello from 127.0.0.1" {
			t.Errorf("control: the host's loopback service: %q %v", g, err)
		}
	})
	t.Run("other-sandbox-loopback", func(t *testing.T) {
		const p = "4711"
		spawnProbe(t, other, "listening", "listen", "127.0.0.1:"+p)
		if got := runProbe(t, sb, "tcp", "127.0.0.1:"+p); got != refusedTCP {
			t.Errorf("another sandbox's 127.0.0.1:%s: %s, want %s", p, got, refusedTCP)
		}
		if got := runProbe(t, other, "tcp", "127.0.0.1:"+p); got != "ok" {
			t.Errorf("control: the other sandbox reaching its own service: %s", got)
		}
	})
	t.Run("other-sandbox-address", func(t *testing.T) {
		const p = 4712
		spawnProbe(t, other, "listening", "listen", "0.0.0.0:"+strconv.Itoa(p))
		_, addr := linkAddrs(t, other)
		if got := runProbe(t, sb, "tcp", addrPort(addr, p)); got != refusedTCP {
			t.Errorf("another sandbox's address %s: %s, want %s", addr, got, refusedTCP)
		}
		if g, err := lab.dial(addrPort(addr, p)); err != nil || g != "hello from "+addr.String() {
			t.Errorf("control: the host reaching the other sandbox's listener: %q %v", g, err)
		}
	})
	t.Run("listen-on-host-interfaces", func(t *testing.T) {
		// A listener on every address of the sandbox is not one of the
		// host's, and the internet has no way to it; published, it is.
		const p = 4713
		spawnProbe(t, sb, "listening", "listen", "[::]:"+strconv.Itoa(p))
		for _, a := range []string{"127.0.0.1", labHost4.String()} {
			if _, err := lab.dial(net.JoinHostPort(a, strconv.Itoa(p))); !errors.Is(err, unix.ECONNREFUSED) {
				t.Errorf("the host's %s:%d: %v, want connection refused (nothing of the sandbox listens there)", a, p, err)
			}
		}
		_, own := linkAddrs(t, sb)
		if _, err := lab.dialFromInet(addrPort(own, p)); err == nil {
			t.Errorf("the internet reached the sandbox's listener at %s", own)
		}
		pp, err := sb.PublishPort(context.Background(), 0, p)
		if err != nil {
			t.Fatal(err)
		}
		g, err := lab.dial(net.JoinHostPort(pp.HostAddress, strconv.Itoa(pp.HostPort)))
		if err != nil || g != "hello from "+own.String() {
			t.Errorf("control: the published port %d: %q %v", pp.HostPort, g, err)
		}
		if err := sb.UnpublishPort(context.Background(), pp.HostPort); err != nil {
			t.Fatal(err)
		}
		if _, err := lab.dial(net.JoinHostPort(pp.HostAddress, strconv.Itoa(pp.HostPort))); !errors.Is(err, unix.ECONNREFUSED) {
			t.Errorf("after unpublishing, host port %d: %v, want connection refused", pp.HostPort, err)
		}
	})
	t.Run("proc-net", func(t *testing.T) {
		// A listener of the test process (the host's namespace) is not in
		// the sandbox's /proc/net; one of the sandbox's is.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		defer ln.Close()
		hostPort := fmt.Sprintf(":%04X ", ln.Addr().(*net.TCPAddr).Port)
		spawnProbe(t, sb, "listening", "listen", "127.0.0.1:4714")
		out := mustRun(t, sb, "cat /proc/net/tcp /proc/net/tcp6")
		if strings.Contains(out, hostPort) {
			t.Errorf("the sandbox's /proc/net/tcp shows the host's socket on port%s", hostPort)
		}
		if !strings.Contains(out, fmt.Sprintf(":%04X ", 4714)) {
			t.Errorf("control: the sandbox's own listener is not in its /proc/net/tcp:\n%s", out)
		}
		if host, _ := os.ReadFile("/proc/net/tcp"); !strings.Contains(string(host), hostPort) {
			t.Errorf("control: the host's /proc/net/tcp lacks port%s", hostPort)
		}
	})
	t.Run("dns-through-host", func(t *testing.T) {
		before := lab.Queries()
		if got := runProbe(t, sb, "resolve", "public.test"); got != "ok" {
			t.Errorf("resolving public.test through the sandbox's resolver: %s", got)
		}
		if lab.Queries() == before {
			t.Errorf("the lab's resolver got no query")
		}
	})
	t.Run("dns-public-server", func(t *testing.T) {
		if got := runProbe(t, sb, "dns", labPublic4.String()); got != "ok" {
			t.Errorf("a query to the public DNS server %s: %s", labPublic4, got)
		}
	})
	t.Run("dns-private-resolver-direct", func(t *testing.T) {
		// The host's resolver is private: reachable through the gateway's
		// forwarding only, not directly.
		if got := runProbe(t, sb, "dns", labResolver.String()); got != "EHOSTUNREACH" && got != "EACCES" {
			t.Errorf("a query straight to the private resolver %s: %s, want an ICMP refusal", labResolver, got)
		}
	})
	t.Run("raw-sockets", func(t *testing.T) {
		for name, want := range map[string]string{"raw_socket": "EPERM", "packet_socket": "EPERM", "ping_socket": "EACCES"} {
			if got := runProbe(t, sb, name); got != want {
				t.Errorf("%s: %s, want %s", name, got, want)
			}
		}
		if os.Geteuid() == 0 {
			if got := runEscapeProbe("raw_socket", nil); got != "ok" {
				t.Errorf("control: a raw socket on the host as root: %s", got)
			}
		}
	})
	t.Run("change-own-interface", func(t *testing.T) {
		// The namespace belongs to the host's user namespace: the
		// sandbox's root cannot add an address.
		if got := runProbe(t, sb, "netlink_addr"); got != "EPERM" {
			t.Errorf("adding an address to eth0: %s, want EPERM", got)
		}
		scratch := newNetns(t)
		var got string
		must(t, inNS(scratch, func() error { got = runEscapeProbe("netlink_addr", nil); return nil }))
		if got != "ok" {
			t.Errorf("control: adding an address in a namespace of the host's: %s", got)
		}
	})
	t.Run("refusals-counted", func(t *testing.T) {
		info, err := sb.Info(context.Background())
		must(t, err)
		if n := info.Network; n.Mode != sandbox.NetworkPublic || n.RefusedPackets == 0 {
			t.Errorf("Info.Network %+v, want mode public and refused packets counted", n)
		}
	})
}

func TestNetworkBlockAllLab(t *testing.T) {
	lab := newNetLab(t)
	sb := lab.sandbox(t, local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}})
	if got := strings.TrimSpace(mustRun(t, sb, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")); got != "lo" {
		t.Errorf("interfaces: %q, want lo only", got)
	}
	before := lab.Queries()
	for _, c := range []struct{ name, arg, want string }{
		{"tcp", addrPort(labPublic4, lab.Port), "ENETUNREACH"},
		{"tcp", addrPort(labPublic6, lab.Port), "ENETUNREACH"},
		{"dns", labPublic4.String(), "ENETUNREACH"},
		{"resolve", "public.test", "ENETUNREACH"},
	} {
		if got := runProbe(t, sb, c.name, c.arg); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.name, c.arg, got, c.want)
		}
	}
	if lab.Queries() != before {
		t.Errorf("a DNS query left the blocked sandbox")
	}
	if local.NetworkLink(sb) != 0 {
		t.Errorf("a blocked sandbox has a link")
	}
}

func TestNetworkAllowList(t *testing.T) {
	lab := newNetLab(t)
	sb := lab.sandbox(t, local.Config{Network: netPolicy(t, false, "203.0.113.10, 10.1.2.0/24", "")})
	port := lab.Port
	for _, c := range []struct {
		what string
		a    netip.Addr
		want string
	}{
		{"listed address", labPublic4, "ok"},
		{"listed private range", labPrivate["10/8"], "ok"},
		{"unlisted public address", labPublic4b, refusedTCP},
		{"unlisted private range", labPrivate["172.16/12"], refusedTCP},
		{"IPv6 past an IPv4-only list", labPublic6, refusedTCP},
		{"cloud metadata", labPrivate["169.254/16"], refusedTCP},
		{"the host's own address", labHost4, refusedTCP},
	} {
		t.Run(c.what, func(t *testing.T) {
			if got := runProbe(t, sb, "tcp", addrPort(c.a, port)); got != c.want {
				t.Errorf("%s (%s): %s, want %s", c.a, c.what, got, c.want)
			}
		})
	}
	t.Run("no-dns", func(t *testing.T) {
		before := lab.Queries()
		// UDP/53 to a listed address, and the sandbox's resolver.
		if got := runProbe(t, sb, "dns", labPublic4.String()); got != "EHOSTUNREACH" && got != "EACCES" {
			t.Errorf("a DNS query to the listed %s: %s, want an ICMP refusal", labPublic4, got)
		}
		if got := runProbe(t, sb, "resolve", "public.test"); got == "ok" {
			t.Errorf("resolving through the sandbox's resolver worked")
		}
		if lab.Queries() != before {
			t.Errorf("%d DNS queries left the sandbox", lab.Queries()-before)
		}
	})
	t.Run("info", func(t *testing.T) {
		info, err := sb.Info(context.Background())
		must(t, err)
		if n := info.Network; n.Mode != sandbox.NetworkAllowList || strings.Join(n.AllowList, ",") != "203.0.113.10/32,10.1.2.0/24" || n.RefusedPackets == 0 {
			t.Errorf("Info.Network %+v", n)
		}
		if ins := sb.Instructions(); !strings.Contains(ins, "limited to these address ranges: 203.0.113.10/32, 10.1.2.0/24") {
			t.Errorf("Instructions: %s", ins)
		}
	})
}

func TestNetworkLiveSwitch(t *testing.T) {
	lab := newNetLab(t)
	sb := lab.sandbox(t, local.Config{})
	ctx := context.Background()
	v4, v6 := addrPort(labPublic4, lab.Port), addrPort(labPublic6, lab.Port)
	hold4 := spawnProbe(t, sb, "up", "hold", v4)
	hold6 := spawnProbe(t, sb, "up", "hold", v6)
	ended := func(p sandbox.Process) string {
		var out string
		poll(10*time.Second, func() bool { out = p.Stdout(); return strings.Count(out, "\n") >= 2 })
		return strings.TrimSpace(strings.TrimPrefix(out, "up\n"))
	}
	mode := func(want sandbox.NetworkMode) {
		t.Helper()
		info, err := sb.Info(ctx)
		must(t, err)
		if info.Network.Mode != want {
			t.Errorf("mode %s, want %s", info.Network.Mode, want)
		}
	}

	// default → allow-cidr: the IPv6 connection is cut, the IPv4 one lives.
	must(t, sb.UpdateNetworkSettings(ctx, netPolicy(t, false, "203.0.113.0/24", "")))
	mode(sandbox.NetworkAllowList)
	if got := ended(hold6); got != "ECONNRESET" {
		t.Errorf("the existing IPv6 connection after allow-cidr: %q, want ECONNRESET", got)
	}
	if got := runProbe(t, sb, "tcp", v6); got != refusedTCP {
		t.Errorf("a new IPv6 connection after allow-cidr: %s", got)
	}
	if got := runProbe(t, sb, "tcp", v4); got != "ok" {
		t.Errorf("a new IPv4 connection after allow-cidr: %s", got)
	}
	if strings.Count(hold4.Stdout(), "\n") != 1 {
		t.Errorf("the existing IPv4 connection ended: %q", hold4.Stdout())
	}
	// → block-all: no interface; the IPv4 connection stops too.
	must(t, sb.UpdateNetworkSettings(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}))
	mode(sandbox.NetworkBlocked)
	if got := ended(hold4); got == "" {
		t.Errorf("the existing IPv4 connection still runs after block-all")
	}
	if got := runProbe(t, sb, "tcp", v4); got != "ENETUNREACH" {
		t.Errorf("a new connection after block-all: %s", got)
	}
	// → default: back to the public internet, DNS included.
	must(t, sb.UpdateNetworkSettings(ctx, sandbox.NetworkPolicy{}))
	mode(sandbox.NetworkPublic)
	for _, a := range []string{v4, v6} {
		if got := runProbe(t, sb, "tcp", a); got != "ok" {
			t.Errorf("%s after default: %s", a, got)
		}
	}
	if got := runProbe(t, sb, "resolve", "public.test"); got != "ok" {
		t.Errorf("DNS after default: %s", got)
	}
	// The policy is the sandbox's: recorded, and kept by a restart.
	must(t, opened(t, sb.StateDir(), sb.ID()).UpdateNetworkSettings(ctx, netPolicy(t, false, "203.0.113.0/24", "")))
	must(t, sb.Stop(ctx))
	if got := runProbe(t, sb, "tcp", v6); got != refusedTCP {
		t.Errorf("IPv6 after a restart with allow-cidr: %s", got)
	}
	mode(sandbox.NetworkAllowList)
}

func TestNetworkHostNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	go serveGreeting(ln)
	addr := ln.Addr().String()
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	host := newSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}, Volumes: probeConfig(local.Confinement{}).Volumes}})
	own := newSandbox(t, local.Options{StateDir: stateDir, Config: probeConfig(local.Confinement{})})
	if got := runProbe(t, own, "tcp", addr); got != refusedTCP {
		t.Errorf("the host's loopback service %s from a default sandbox: %s, want %s", addr, got, refusedTCP)
	}
	if got := runProbe(t, host, "tcp", addr); got != "ok" {
		t.Errorf("control: from a HostNetwork sandbox: %s", got)
	}
	info, err := host.Info(context.Background())
	must(t, err)
	if info.Network.Mode != sandbox.NetworkHost || !strings.Contains(host.Instructions(), "shared with the host") {
		t.Errorf("Info %+v, Instructions %s", info.Network, host.Instructions())
	}
	if err := host.UpdateNetworkSettings(context.Background(), sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("changing a HostNetwork sandbox's policy: %v", err)
	}
}

// TestNetworkHostUplink runs the real path: a sandbox linked to this
// host's own namespace. Its targets are this host's own addresses, which
// the host routes to itself (checked first), so nothing leaves.
func TestNetworkHostUplink(t *testing.T) {
	testenv.NeedRoot(t, "needs root: the sandbox's link")
	ln, err := net.Listen("tcp", ":0")
	must(t, err)
	defer ln.Close()
	go serveGreeting(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	// The host's own addresses, but not those of other sandboxes' links:
	// tests running beside this one add and remove them.
	var targets []netip.Addr
	ifaces, err := net.Interfaces()
	must(t, err)
	for _, ifc := range ifaces {
		if strings.HasPrefix(ifc.Name, "agentbox") {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
				targets = append(targets, p.Addr())
			}
		}
	}
	if len(targets) == 0 {
		t.Skip("the host has no address but loopback and link-local")
	}
	for _, a := range targets {
		routes, err := netlink.RouteGet(a.AsSlice())
		if err != nil || len(routes) == 0 || routes[0].Type != unix.RTN_LOCAL {
			t.Fatalf("the host does not route its own %s to itself: %+v %v", a, routes, err)
		}
	}
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	sb := newSandbox(t, local.Options{StateDir: stateDir, Config: probeConfig(local.Confinement{})})
	n := local.NetworkLink(sb)
	if n == 0 {
		t.Fatal("no link")
	}
	info, err := sb.Info(context.Background())
	must(t, err)
	noIPv6 := strings.Contains(info.Network.Note, "no IPv6")
	for _, a := range targets {
		got := runProbe(t, sb, "tcp", addrPort(a, port))
		if got != refusedTCP && !(a.Is6() && noIPv6 && got == "ENETUNREACH") {
			t.Errorf("the host's own %s: %s, want %s (or ENETUNREACH for IPv6 when the sandbox has none)", a, got, refusedTCP)
		}
		if g, err := greetingFrom(nil, addrPort(a, port)); err != nil || g != "hello from "+a.String() {
			t.Errorf("control: the host reaching its own %s: %q %v", a, g, err)
		}
	}
	if _, err := netlink.LinkByName("agentbox" + strconv.Itoa(n)); err != nil {
		t.Errorf("the host has no link agentbox%d: %v", n, err)
	}
	must(t, sb.Destroy(context.Background()))
	if _, err := netlink.LinkByName("agentbox" + strconv.Itoa(n)); err == nil {
		t.Errorf("the link agentbox%d outlived the sandbox", n)
	}
	// Other packages' tests make and remove host links meanwhile: look
	// under the uplink's lock, which agentbox holds while it changes the
	// uplink (a link removed, forwarding not yet restored, is mid-change).
	ns, err := os.Open("/proc/self/ns/net")
	must(t, err)
	defer ns.Close()
	must(t, unix.Flock(int(ns.Fd()), unix.LOCK_EX))
	links, err := netlink.LinkList()
	for try := 0; errors.Is(err, netlink.ErrDumpInterrupted) && try < 10; try++ {
		links, err = netlink.LinkList() // an ended sandbox's link went meanwhile
	}
	must(t, err)
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "agentbox") {
			t.Logf("another sandbox's link %s runs: forwarding is not checked", l.Attrs().Name)
			return
		}
	}
	// The last sandbox gone, the host forwards as it did before.
	if all, _ := os.ReadFile("/proc/sys/net/ipv4/conf/all/forwarding"); strings.TrimSpace(string(all)) == "0" {
		out, _ := os.ReadFile("/proc/sys/net/ipv4/conf/default/forwarding")
		if strings.TrimSpace(string(out)) != "0" {
			t.Errorf("default forwarding %q", out)
		}
		for _, l := range links {
			b, _ := os.ReadFile("/proc/sys/net/ipv4/conf/" + l.Attrs().Name + "/forwarding")
			if strings.TrimSpace(string(b)) != "0" {
				t.Errorf("IPv4 forwarding left on for %s", l.Attrs().Name)
			}
		}
	}
}

// TestNetworkBadInput: malformed settings are refused before anything is
// created, by sandbox.ParseNetworkPolicy (the one parser), New and
// UpdateNetworkSettings.
func TestNetworkBadInput(t *testing.T) {
	var many []string
	for i := range 11 {
		many = append(many, fmt.Sprintf("203.0.113.%d", i))
	}
	host := func(allow, domains string) sandbox.NetworkPolicy {
		p, _ := sandbox.ParseNetworkPolicy(false, allow, domains)
		p.Mode = sandbox.NetworkHost
		return p
	}
	for _, c := range []struct {
		allow    string
		blockAll bool
		host     *sandbox.NetworkPolicy // set: the policy, not the wire form
		says     string
	}{
		{allow: "203.0.113.0/33", says: "not a CIDR"},
		{allow: "example.com", says: "DomainAllowList"},
		{allow: "203.0.113.1/24", says: "did you mean 203.0.113.0/24"},
		{allow: strings.Join(many, ","), says: "more than 10 entries"},
		{allow: " , ", says: "lists no CIDR"},
		{allow: "169.254.169.254", says: "link-local"},
		{allow: "127.0.0.0/8", says: "loopback"},
		{allow: "10.231.0.0/24", says: "sandboxes' own links"},
		{allow: "::ffff:203.0.113.0/120", says: "IPv4-mapped"},
		{allow: "fe80::1%eth0", says: "zone"},
		{allow: "203.0.113.0/24", blockAll: true, says: "two network modes"},
		{host: new(host("203.0.113.0/24", "")), says: "HostNetwork"},
		{host: new(host("", "example.com")), says: "HostNetwork"},
	} {
		stateDir := t.TempDir()
		var err error
		p := sandbox.NetworkPolicy{}
		if c.host != nil {
			p = *c.host
		} else {
			p, err = sandbox.ParseNetworkPolicy(c.blockAll, c.allow, "")
		}
		if err == nil {
			_, err = local.New(local.Options{StateDir: stateDir, Config: local.Config{Network: p}})
		}
		if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want ErrInvalidArgument saying %q", c, err, c.says)
		}
		if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
			t.Errorf("%+v: New left %v", c, ents)
		}
	}
	// Canonical form.
	sb, err := local.New(local.Options{StateDir: t.TempDir(), Config: local.Config{Network: netPolicy(t, false, " 203.0.113.0/24,2001:DB8::/32, 203.0.113.0/24,198.51.100.7", "")}})
	must(t, err)
	info, _ := sb.Info(context.Background())
	if got := strings.Join(info.Network.AllowList, ","); got != "203.0.113.0/24,2001:db8::/32,198.51.100.7/32" {
		t.Errorf("stored list %q", got)
	}
	// UpdateNetworkSettings refuses bad settings and keeps the old ones.
	sb = newSandbox(t, local.Options{Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	for _, p := range []sandbox.NetworkPolicy{
		{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{{}}},
		{Mode: sandbox.NetworkBlocked, Allow: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}},
		{Mode: sandbox.NetworkAllowList, Domains: []string{"a b"}},
		{Mode: sandbox.NetworkHost},
	} {
		if err := sb.UpdateNetworkSettings(context.Background(), p); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", p, err)
		}
	}
	if info, _ := localtest.Lookup(context.Background(), sb.StateDir(), sb.ID()); info.Network.Mode != sandbox.NetworkBlocked {
		t.Errorf("after refused updates: mode %s", info.Network.Mode)
	}
	if _, err := local.Open(context.Background(), t.TempDir(), "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("updating a sandbox that does not exist: %v", err)
	}
}

func TestPublishPort(t *testing.T) {
	lab := newNetLab(t)
	sb := lab.sandbox(t, local.Config{})
	other := lab.sandbox(t, local.Config{})
	ctx := context.Background()
	spawnProbe(t, sb, "listening", "listen", "0.0.0.0:8080")
	pp, err := sb.PublishPort(ctx, 0, 8080)
	must(t, err)
	_, own := linkAddrs(t, sb)
	hostAddr := net.JoinHostPort(pp.HostAddress, strconv.Itoa(pp.HostPort))
	if g, err := lab.dial(hostAddr); err != nil || g != "hello from "+own.String() {
		t.Fatalf("published %s: %q %v", hostAddr, g, err)
	}
	info, err := sb.Info(ctx)
	must(t, err)
	if len(info.Network.Ports) != 1 || info.Network.Ports[0] != pp {
		t.Errorf("Info ports %+v, want %+v", info.Network.Ports, pp)
	}
	if _, err := other.PublishPort(ctx, pp.HostPort, 8080); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "another sandbox") {
		t.Errorf("publishing the same host port for another sandbox: %v", err)
	}
	if _, err := sb.PublishPort(ctx, pp.HostPort, 9090); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("publishing a host port twice: %v", err)
	}
	for _, bad := range [][2]int{{-1, 80}, {80, 0}, {70000, 80}} {
		if _, err := sb.PublishPort(ctx, bad[0], bad[1]); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("ports %v: %v", bad, err)
		}
	}
	// Kept across a restart.
	must(t, sb.Stop(ctx))
	spawnProbe(t, sb, "listening", "listen", "0.0.0.0:8080")
	_, own = linkAddrs(t, sb)
	if g, err := lab.dial(hostAddr); err != nil || g != "hello from "+own.String() {
		t.Errorf("after a restart, %s: %q %v", hostAddr, g, err)
	}
	blocked := lab.sandbox(t, local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}})
	if _, err := blocked.PublishPort(ctx, 0, 80); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "loopback only") {
		t.Errorf("publishing a port of a blocked sandbox: %v", err)
	}
}

// TestNetworkLiveDomainSwitch: a running sandbox switched to a domain
// allow list gets its egress proxy (and commands its variables) at once;
// a new list reaches the running proxy (SIGHUP); switched back, the
// proxy ends and the variables go.
func TestNetworkLiveDomainSwitch(t *testing.T) {
	testenv.Need(t, haveCurl(), "curl is not installed: the probes run it inside the sandbox")
	port := originServer(t)
	lab := newNetLab(t)
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	sb := openSandbox(t, local.Options{StateDir: stateDir, Config: probeConfig(local.Confinement{})})
	local.SetNetworkTestUplink(sb, lab.UplinkPath, labResolver)
	local.SetEgressTestHooks(sb, testHosts, true)
	ctx := context.Background()
	if got := runProbe(t, sb, "tcp", addrPort(labPublic4, lab.Port)); got != "ok" {
		t.Fatalf("default network: %s", got)
	}
	must(t, sb.UpdateNetworkSettings(ctx, netPolicy(t, false, "", "allowed.test")))
	if code, out := curl(t, sb, "http://allowed.test:"+port+"/a"); code != 0 || out != "origin /a host=allowed.test:"+port {
		t.Errorf("through the proxy started live: exit %d %q", code, out)
	}
	if got := runProbe(t, sb, "tcp", addrPort(labPublic4, lab.Port)); got != "ENETUNREACH" {
		t.Errorf("a direct connection with the domain list: %s, want ENETUNREACH", got)
	}
	pid := local.EgressProxyPID(sb)
	must(t, opened(t, sb.StateDir(), sb.ID()).UpdateNetworkSettings(ctx, netPolicy(t, false, "", "other.test")))
	if local.EgressProxyPID(sb) != pid {
		t.Errorf("a new list started a new proxy instead of telling the running one")
	}
	var out string
	if !poll(5*time.Second, func() bool {
		_, out = curl(t, sb, "http://allowed.test:"+port+"/")
		return strings.Contains(out, "allowed.test is not on the sandbox's domain allow list")
	}) {
		t.Errorf("allowed.test after the list changed to other.test: %q, want a refusal", out)
	}
	if code, out := curl(t, sb, "http://other.test:"+port+"/b"); code != 0 || out != "origin /b host=other.test:"+port {
		t.Errorf("other.test after the change: exit %d %q", code, out)
	}
	must(t, sb.UpdateNetworkSettings(ctx, sandbox.NetworkPolicy{}))
	if !processGone(pid) {
		t.Errorf("the proxy %d outlived the switch back", pid)
	}
	if got := mustRun(t, sb, `echo "[$HTTP_PROXY]"`); got != "[]\n" {
		t.Errorf("HTTP_PROXY after the switch back: %q", got)
	}
	if got := runProbe(t, sb, "tcp", addrPort(labPublic4, lab.Port)); got != "ok" {
		t.Errorf("default network again: %s", got)
	}
}
