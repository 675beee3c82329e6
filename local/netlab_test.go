//go:build linux

package local_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/internal/netns"
)

// The network lab: an "internet" made of network namespaces the test
// owns, so that no probe ever sends a packet out of the machine.
//
//	sandbox ──eth0/agentbox<n>── uplink ──up0/net0── inet
//
// The uplink plays the host's namespace for the lab's sandboxes (they are
// linked to it, local.SetNetworkTestUplink): its up0 has 198.51.100.1/24
// and 2001:db8:1::1/64, its default routes lead to inet, and it forwards
// IPv6 (so that sandboxes get IPv6). inet answers on every address of
// labAddrs (on its loopback) and on 198.51.100.2 / 2001:db8:1::2: a
// greeting server on labPort (TCP: "hello from ADDR", then it echoes
// lines) and a DNS server on port 53 (UDP) that knows one name,
// public.test → 203.0.113.10, and counts the queries it gets. The uplink
// runs the greeting server too, on every address of its own.
type netLab struct {
	uplink, inet *os.File
	// UplinkPath names the uplink's namespace for local.SetNetworkTestUplink.
	UplinkPath string
	// Port is the greeting server's port, in inet and in the uplink.
	Port    int
	queries atomic.Int64
}

// Addresses of the lab.
var (
	labPublic4   = netip.MustParseAddr("203.0.113.10")
	labPublic4b  = netip.MustParseAddr("203.0.113.11")
	labPublic6   = netip.MustParseAddr("2001:db8:2::10")
	labResolver  = netip.MustParseAddr("10.53.0.53")
	labHost4     = netip.MustParseAddr("198.51.100.1") // the uplink's own ("the host's") address
	labHost6     = netip.MustParseAddr("2001:db8:1::1")
	labNeighbour = netip.MustParseAddr("198.51.100.2") // inet, on the uplink's network
	labPrivate   = map[string]netip.Addr{
		"10/8":           netip.MustParseAddr("10.1.2.3"),
		"172.16/12":      netip.MustParseAddr("172.16.1.2"),
		"192.168/16":     netip.MustParseAddr("192.168.1.2"),
		"100.64/10":      netip.MustParseAddr("100.64.1.2"),
		"169.254/16":     netip.MustParseAddr("169.254.169.254"),
		"fc00::/7":       netip.MustParseAddr("fd00:1::2"),
		"10/8 via NAT64": netip.MustParseAddr("64:ff9b::a01:203"),
	}
	labAddrs = append([]netip.Addr{labPublic4, labPublic4b, labPublic6, labResolver}, mapValues(labPrivate)...)
)

func mapValues(m map[string]netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range m {
		out = append(out, a)
	}
	return out
}

// newNetLab builds the lab; everything goes when the test ends.
func newNetLab(t testing.TB) *netLab {
	t.Helper()
	testenv.NeedRoot(t, "needs root: the lab's namespaces and the sandboxes' links")
	lab := &netLab{uplink: newNetns(t), inet: newNetns(t)}
	lab.UplinkPath = fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), lab.uplink.Fd())
	up, in := nlHandle(t, lab.uplink), nlHandle(t, lab.inet)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "net0", PeerNamespace: netlink.NsFd(int(lab.inet.Fd()))}
	must(t, up.LinkAdd(veth))
	up0, err := up.LinkByName("up0")
	must(t, err)
	net0, err := in.LinkByName("net0")
	must(t, err)
	lo, err := in.LinkByName("lo")
	must(t, err)
	for _, a := range []string{"198.51.100.1/24", "2001:db8:1::1/64"} {
		must(t, up.AddrAdd(up0, nlAddr(a)))
	}
	for _, a := range []string{"198.51.100.2/24", "2001:db8:1::2/64"} {
		must(t, in.AddrAdd(net0, nlAddr(a)))
	}
	for _, a := range labAddrs {
		must(t, in.AddrAdd(lo, nlAddr(netip.PrefixFrom(a, a.BitLen()).String())))
	}
	must(t, up.LinkSetUp(up0))
	must(t, in.LinkSetUp(net0))
	must(t, up.RouteAdd(&netlink.Route{LinkIndex: up0.Attrs().Index, Gw: net.ParseIP("198.51.100.2")}))
	must(t, up.RouteAdd(&netlink.Route{LinkIndex: up0.Attrs().Index, Gw: net.ParseIP("2001:db8:1::2")}))
	must(t, inNS(lab.uplink, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0)
	}))
	// Servers.
	for _, ns := range []*os.File{lab.inet, lab.uplink} {
		ln := listenIn(t, ns, "tcp", net.JoinHostPort("::", strconv.Itoa(lab.Port)))
		lab.Port = ln.Addr().(*net.TCPAddr).Port
		go serveGreeting(ln)
	}
	// One socket per address, so that answers come from the address asked.
	for _, a := range []netip.Addr{labResolver, labPublic4, labPublic6} {
		pc := listenPacketIn(t, lab.inet, "udp", addrPort(a, 53))
		go serveDNS(pc, &lab.queries)
	}
	lab.assertContained(t)
	return lab
}

// assertContained checks, before any probe, that no packet to a lab
// address can leave the lab: its namespaces have no interface but their
// own, and the uplink routes every lab address to inet (or to itself).
func (lab *netLab) assertContained(t testing.TB) {
	t.Helper()
	up, in := nlHandle(t, lab.uplink), nlHandle(t, lab.inet)
	for ns, h := range map[string]*netlink.Handle{"uplink": up, "inet": in} {
		links, err := h.LinkList()
		must(t, err)
		for _, l := range links {
			if name := l.Attrs().Name; !slices.Contains([]string{"lo", "up0", "net0"}, name) && !strings.HasPrefix(name, "agentbox") {
				t.Fatalf("the lab's %s namespace has an interface %s of unknown origin", ns, name)
			}
		}
	}
	up0, err := up.LinkByName("up0")
	must(t, err)
	for _, a := range append(slices.Clone(labAddrs), labNeighbour, labHost4, labHost6) {
		routes, err := up.RouteGet(a.AsSlice())
		must(t, err)
		for _, r := range routes {
			if r.LinkIndex != up0.Attrs().Index && r.Type != unix.RTN_LOCAL && r.LinkIndex != 1 {
				t.Fatalf("the uplink routes %s through interface %d, not the lab's up0", a, r.LinkIndex)
			}
		}
	}
}

// Queries returns how many DNS queries inet's resolver got.
func (lab *netLab) Queries() int64 { return lab.queries.Load() }

// sandbox starts a sandbox with c and the escape probes, linked to the lab.
func (lab *netLab) sandbox(t testing.TB, c local.Config) *local.Sandbox {
	t.Helper()
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	pc := probeConfig(c.Confinement)
	c.Volumes = append(c.Volumes, pc.Volumes...)
	sb := openSandbox(t, local.Options{StateDir: stateDir, Config: c})
	local.SetNetworkTestUplink(sb, lab.UplinkPath, labResolver)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return sb
}

// dial connects from the uplink (the lab's host) to addr and returns the
// greeting line, or the error.
func (lab *netLab) dial(addr string) (string, error) {
	return greetingFrom(lab.uplink, addr)
}

// dialFromInet is dial from inet (the internet).
func (lab *netLab) dialFromInet(addr string) (string, error) {
	return greetingFrom(lab.inet, addr)
}

// greetingFrom dials addr from the namespace ns (nil: this process's) and
// returns the greeting line.
func greetingFrom(ns *os.File, addr string) (string, error) {
	var line string
	dial := func() error {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	var err error
	if ns == nil {
		err = dial()
	} else {
		err = inNS(ns, dial)
	}
	return strings.TrimSpace(line), err
}

// serveGreeting greets each connection with the address it reached, then
// echoes what it gets. When ln closes, so do its connections (a peer that
// lost its network never closes its end).
func serveGreeting(ln net.Listener) {
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		go func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			local := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			fmt.Fprintf(c, "hello from %s\n", local)
			io.Copy(c, c)
		}()
	}
}

// serveDNS answers A queries for public.test with labPublic4 (and every
// other query with no answer), counting them.
func serveDNS(pc net.PacketConn, queries *atomic.Int64) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		queries.Add(1)
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if q.Type == dnsmessage.TypeA && strings.EqualFold(q.Name.String(), "public.test.") {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: labPublic4.As4()})
		}
		if msg, err := b.Finish(); err == nil {
			pc.WriteTo(msg, from)
		}
	}
}

// newNetns makes a network namespace with loopback up, closed (and so
// gone) when the test ends.
func newNetns(t testing.TB) *os.File {
	t.Helper()
	var f *os.File
	err := onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		var err error
		f, err = os.Open("/proc/thread-self/ns/net")
		return err
	})
	must(t, err)
	t.Cleanup(func() { f.Close() })
	h := nlHandle(t, f)
	lo, err := h.LinkByName("lo")
	must(t, err)
	must(t, h.LinkSetUp(lo))
	return f
}

// onThread runs f on a thread of its own that ends with it (f may change
// the thread's namespaces); inNS runs f in the network namespace ns.
var (
	onThread = netns.OnThrowawayThread
	inNS     = netns.Run
)

// listenIn listens in the namespace ns; the listener closes when the test
// ends.
func listenIn(t testing.TB, ns *os.File, network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	must(t, inNS(ns, func() (err error) { ln, err = net.Listen(network, addr); return err }))
	t.Cleanup(func() { ln.Close() })
	return ln
}

// listenPacketIn is listenIn for datagrams.
func listenPacketIn(t testing.TB, ns *os.File, network, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	must(t, inNS(ns, func() (err error) { pc, err = net.ListenPacket(network, addr); return err }))
	t.Cleanup(func() { pc.Close() })
	return pc
}

// nlHandle returns a netlink handle in the namespace ns, closed when the
// test ends.
func nlHandle(t testing.TB, ns *os.File) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(vnetns.NsHandle(ns.Fd()), unix.NETLINK_ROUTE)
	must(t, err)
	t.Cleanup(h.Close)
	return h
}

func nlAddr(cidr string) *netlink.Addr {
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		panic(err)
	}
	a.Flags = unix.IFA_F_NODAD
	return a
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
