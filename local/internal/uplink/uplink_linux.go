// Package uplink keeps the uplink: the network namespace where the links of sandboxes end and
// their traffic is forwarded and masqueraded. It is this host's (the
// namespace of the process that starts sandboxes), or one a test names
// (local's netRecord.Uplink), so that tests never send a packet out of the
// machine.
//
// Every change to the uplink happens under an exclusive flock of its
// namespace file (/proc/self/ns/net, or the test's file): the lock is
// per namespace, shared by every process and state dir, and vanishes with
// the namespace. Nothing is written to the file system.
//
// What agentbox changes in the uplink while at least one sandbox has a
// link, and undoes when the last one goes (cleanup):
//   - a veth pair per sandbox: agentbox<n> here, eth0 in the sandbox;
//     on agentbox<n>, IPv4 forwarding and route_localnet (for DNS to a
//     resolver on the host's loopback and for published ports) are
//     turned on; they go with the link;
//   - an nftables table per sandbox (package netfilter), and the table
//     "inet agentbox" of the uplink as a whole;
//   - IPv4 forwarding on the interfaces of the default routes, where it
//     is off (net.ipv4.conf.<if>.forwarding: IPv4 forwards a packet only
//     when the interface it came in through forwards, so replies need
//     it). The table "inet agentbox" remembers them (set netfilter.FlippedSet) and,
//     while they forward for agentbox only, refuses (chain "forward") new
//     connections that came in through them and are not going to a
//     sandbox, so that the host does not become a router for its
//     networks. When the last sandbox goes, they are turned off again,
//     unless forwarding was turned on for every interface meanwhile
//     (net.ipv4.ip_forward = 1: someone else wants it).
//
// IPv6: the kernel forwards IPv6 only when forwarding is on for every
// interface (net.ipv6.conf.all.forwarding), which also stops the host
// from accepting router advertisements; agentbox never turns it on.
// Sandboxes get IPv6 (a ULA address, masqueraded) only where the uplink
// forwards IPv6 already; elsewhere they have no IPv6 route.
package uplink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/lockfile"
	"github.com/agentbox-dev/agentbox/local/internal/netfilter"
	"github.com/agentbox-dev/agentbox/local/internal/netns"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Uplink is an uplink opened and locked for changes (Open), until Close.
type Uplink struct {
	ns     *os.File // the namespace; nil: this process's own
	lock   *os.File
	nl     *netlink.Handle
	nft    *nftables.Conn
	locked bool // holds uplinkTurn
}

// uplinkTurn is held, within this process, by whoever holds an uplink
// open: besides the flock (which orders processes, but which the race
// detector does not see), it orders this process's goroutines, as the
// nftables library's batches need (they number their sets from one
// counter of the library's). It is process-wide because that counter
// is.
var uplinkTurn = make(chan struct{}, 1)

// Open opens and locks the uplink named by path ("" for this
// host's).
func Open(ctx context.Context, path string) (*Uplink, error) {
	u := &Uplink{}
	select {
	case uplinkTurn <- struct{}{}:
		u.locked = true
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// This thread's: /proc/self shows the main thread's, which a
	// library user may have moved.
	name := "/proc/thread-self/ns/net"
	if path != "" {
		name = path
	}
	f, err := os.Open(name)
	if err != nil {
		u.Close()
		return nil, fmt.Errorf("sandbox network: open the uplink namespace: %w", err)
	}
	u.lock = f
	if err := lockfile.Lock(ctx, f, unix.LOCK_EX); err != nil {
		u.Close()
		return nil, err
	}
	if path != "" {
		u.ns = f
		u.nl, err = netlink.NewHandleAt(vnetns.NsHandle(f.Fd()), unix.NETLINK_ROUTE)
		if err == nil {
			u.nft, err = nftables.New(nftables.WithNetNSFd(int(f.Fd())))
		}
	} else {
		u.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		if err == nil {
			u.nft, err = nftables.New()
		}
	}
	if err != nil {
		u.Close()
		return nil, fmt.Errorf("sandbox network: %w", err)
	}
	return u, nil
}

// NFT returns the uplink's nftables connection, whose pending batch the
// caller fills (a sandbox's firewall, package netfilter) and flushes.
func (u *Uplink) NFT() *nftables.Conn { return u.nft }

// Read runs f with an nftables connection to the uplink named by
// path, for reading (without its lock).
func Read(path string, f func(*nftables.Conn) error) error {
	if path == "" {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		return f(c)
	}
	ns, err := os.Open(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return err
	}
	return f(c)
}

// Close unlocks and releases the uplink.
func (u *Uplink) Close() {
	if u.nl != nil {
		u.nl.Close()
	}
	if u.lock != nil {
		u.lock.Close() // releases the flock
	}
	if u.locked {
		u.locked = false
		<-uplinkTurn
	}
}

// sysctl reads the sysctl key ("net/ipv4/ip_forward") of the uplink.
func (u *Uplink) sysctl(key string) (string, error) {
	var v string
	err := netns.Run(u.ns, func() error {
		b, err := os.ReadFile("/proc/sys/" + key)
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// setSysctl writes the sysctl key of the uplink.
func (u *Uplink) setSysctl(key, value string) error {
	return netns.Run(u.ns, func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0) })
}

// ForwardsIPv6 reports whether the uplink forwards IPv6 already.
func (u *Uplink) ForwardsIPv6() bool {
	v, err := u.sysctl("net/ipv6/conf/all/forwarding")
	return err == nil && v == "1"
}

// AddLink makes the link of the sandbox whose network namespace is sbx,
// and returns its number n and the host end's interface index: a veth
// pair, agentbox<n> here and eth0 there, with the addresses of
// netfilter.SandboxLink(n) (IPv6 too when v6) and the sandbox's default routes
// through it.
func (u *Uplink) AddLink(sbx *os.File, v6 bool) (n, ifindex int, err error) {
	for try := 0; try < 64; try++ {
		n = 1 + rand.IntN(netfilter.MaxLinks-1)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: netfilter.LinkName(n)}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(sbx.Fd()))}
		err := u.nl.LinkAdd(veth)
		if errors.Is(err, unix.EEXIST) {
			continue // another sandbox's number
		}
		if err != nil {
			return 0, 0, fmt.Errorf("sandbox network: make the link: %w", err)
		}
		ifindex, err := u.configureLink(n, sbx, v6)
		if err != nil {
			_ = u.nl.LinkDel(veth)
			return 0, 0, fmt.Errorf("sandbox network: configure the link: %w", err)
		}
		return n, ifindex, nil
	}
	return 0, 0, errors.New("sandbox network: no free link number (too many sandboxes)")
}

// configureLink addresses both ends of link n and routes the sandbox
// through it; it returns the host end's interface index.
func (u *Uplink) configureLink(n int, sbx *os.File, v6 bool) (int, error) {
	host, err := u.nl.LinkByName(netfilter.LinkName(n))
	if err != nil {
		return 0, err
	}
	return host.Attrs().Index, u.configureEnds(n, host, sbx, v6)
}

// configureEnds addresses the ends of link n (host, here) and routes the
// sandbox through it.
func (u *Uplink) configureEnds(n int, host netlink.Link, sbx *os.File, v6 bool) error {
	gw4, sbx4, gw6, sbx6 := netfilter.SandboxLink(n)
	if err := u.nl.AddrAdd(host, addr(gw4, 30)); err != nil {
		return err
	}
	if v6 {
		if err := u.nl.AddrAdd(host, addr(gw6, 64)); err != nil {
			return err
		}
	}
	conf := "net/ipv4/conf/" + netfilter.LinkName(n) + "/"
	for _, key := range []string{conf + "forwarding", conf + "route_localnet"} {
		if err := u.setSysctl(key, "1"); err != nil {
			return err
		}
	}
	// Its IPv6 link-local address usable at once (best effort: IPv6 may
	// be off).
	_ = u.setSysctl("net/ipv6/conf/"+netfilter.LinkName(n)+"/accept_dad", "0")
	if err := u.nl.LinkSetUp(host); err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(vnetns.NsHandle(sbx.Fd()), unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	eth, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := h.AddrAdd(eth, addr(sbx4, 30)); err != nil {
		return err
	}
	if v6 {
		if err := h.AddrAdd(eth, addr(sbx6, 64)); err != nil {
			return err
		}
	}
	if err := h.LinkSetUp(eth); err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw4.AsSlice()}); err != nil {
		return err
	}
	if v6 {
		return h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw6.AsSlice()})
	}
	return nil
}

// addr is a netlink address a/bits, without duplicate address detection
// (the link has two ends, both ours).
func addr(a netip.Addr, bits int) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())}, Flags: unix.IFA_F_NODAD}
}

// DelLink removes link n, whose host end had the interface index
// ifindex, and its table. The link is gone already when the sandbox's
// namespace ended; then another sandbox may have its number, and its
// link and table are left alone (cleanup removes a table without a
// link).
func (u *Uplink) DelLink(n, ifindex int) {
	l, err := u.nl.LinkByName(netfilter.LinkName(n))
	if err == nil && l.Attrs().Index != ifindex {
		return // another sandbox's
	}
	if err == nil {
		_ = u.nl.LinkDel(l)
	}
	u.nft.DelTable(&nftables.Table{Name: netfilter.TableName(n), Family: nftables.TableFamilyINet})
	_ = u.nft.Flush() // ENOENT: the table was gone
}

// Forward makes the uplink forward IPv4 for its sandboxes: it turns on
// forwarding on the interfaces of its default routes that have it off,
// after it has recorded them in the shared table (a transaction of its
// own, written before the change it records).
func (u *Uplink) Forward() error {
	if all, err := u.sysctl("net/ipv4/conf/all/forwarding"); err == nil && all == "1" {
		return nil
	}
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return u.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("sandbox network: read the host's routes: %w", err)
	}
	var flip []string
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		l, err := u.nl.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		name := l.Attrs().Name
		if v, err := u.sysctl("net/ipv4/conf/" + name + "/forwarding"); err == nil && v == "0" {
			flip = append(flip, name)
		}
	}
	if len(flip) == 0 {
		return nil
	}
	// Recorded first, then turned on: a process killed in between leaves
	// an interface recorded but not flipped (restoring it is a no-op),
	// never one flipped but not recorded (forwarding left on for good).
	_, s := netfilter.SharedTable(u.nft)
	for _, name := range flip {
		if err := u.nft.SetAddElements(s, []nftables.SetElement{{Key: netfilter.IfNameKey(name)}}); err != nil {
			return err
		}
	}
	if err := u.nft.Flush(); err != nil {
		return fmt.Errorf("sandbox network: record the interfaces whose forwarding agentbox turns on: %w", err)
	}
	for _, name := range flip {
		if err := u.setSysctl("net/ipv4/conf/"+name+"/forwarding", "1"); err != nil {
			return fmt.Errorf("sandbox network: turn on IPv4 forwarding on %s: %w", name, err)
		}
	}
	return nil
}

// Cleanup removes the tables of links that are gone and, when no sandbox
// link is left, turns forwarding off again where agentbox turned it on
// and removes the shared table.
func (u *Uplink) Cleanup() error {
	links, err := retryDump(u.nl.LinkList)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, netfilter.LinkPrefix) {
			live[name] = true
		}
	}
	tables, err := u.nft.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return err
	}
	var shared *nftables.Table
	for _, t := range tables {
		if n, ok := netfilter.TableIndex(t.Name); ok && !live[netfilter.LinkName(n)] {
			u.nft.DelTable(t)
		}
		if t.Name == netfilter.SharedTableName {
			shared = t
		}
	}
	if len(live) == 0 && shared != nil {
		u.restoreForwarding(shared)
		u.nft.DelTable(shared)
	}
	return u.nft.Flush()
}

// restoreForwarding turns forwarding off on the interfaces of the set
// netfilter.FlippedSet of the shared table t, unless forwarding is now on for all.
func (u *Uplink) restoreForwarding(t *nftables.Table) {
	if all, err := u.sysctl("net/ipv4/conf/all/forwarding"); err != nil || all == "1" {
		return
	}
	s, err := u.nft.GetSetByName(t, netfilter.FlippedSet)
	if err != nil {
		return
	}
	elems, err := u.nft.GetSetElements(s)
	if err != nil {
		return
	}
	for _, e := range elems {
		name := strings.TrimRight(string(e.Key), "\x00")
		key := "net/ipv4/conf/" + name + "/forwarding"
		if v, err := u.sysctl(key); err == nil && v == "1" {
			_ = u.setSysctl(key, "0")
		}
	}
}

// retryDump returns what the netlink dump f returns, asking again (a few
// times) when the kernel says the dump was interrupted: the table changed
// meanwhile, as it does at any time when a sandbox's network namespace
// ends and the kernel removes its link and that link's routes.
func retryDump[T any](f func() (T, error)) (T, error) {
	for try := 1; ; try++ {
		v, err := f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == 10 {
			return v, err
		}
	}
}

// HostNets returns the networks the uplink sits on: the prefix of each
// of its addresses and each route of scope link (directly reachable),
// but those of loopback, of the sandboxes' links and link-local ones
// (refused in any mode). A sandbox of the public mode reaches none of
// them: a public /24 or an IPv6 /64 the host shares with other machines
// is as much the host's network as a private one.
func (u *Uplink) HostNets() ([]netip.Prefix, error) {
	links, err := retryDump(u.nl.LinkList)
	if err != nil {
		return nil, fmt.Errorf("sandbox network: list the host's links: %w", err)
	}
	skip := map[int]bool{}
	for _, l := range links {
		a := l.Attrs()
		if strings.HasPrefix(a.Name, netfilter.LinkPrefix) || a.Flags&net.FlagLoopback != 0 {
			skip[a.Index] = true
		}
	}
	var out []netip.Prefix
	keep := func(ipn *net.IPNet) {
		if ipn == nil {
			return
		}
		a, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			return
		}
		bits, _ := ipn.Mask.Size()
		p, err := a.Unmap().Prefix(bits)
		if err != nil || p.Bits() == 0 || netfilter.NeverReachable(p) != "" || slices.Contains(out, p) {
			return
		}
		out = append(out, p)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return u.nl.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("sandbox network: list the host's addresses: %w", err)
	}
	for _, a := range addrs {
		if !skip[a.LinkIndex] {
			keep(a.IPNet)
		}
	}
	routes, err := retryDump(func() ([]netlink.Route, error) { return u.nl.RouteList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("sandbox network: list the host's routes: %w", err)
	}
	for _, r := range routes {
		if r.Scope == netlink.SCOPE_LINK && r.Gw == nil && !skip[r.LinkIndex] {
			keep(r.Dst)
		}
	}
	return out, nil
}
