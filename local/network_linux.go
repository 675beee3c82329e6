package local

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local/internal/netfilter"
	"github.com/agentbox-dev/agentbox/local/internal/uplink"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The sandbox's network, host side (network.go has the options).
//
// As root, the host makes the network namespace of every sandbox that
// does not share the host's (package netns), owned by the host's user
// namespace, and starts the init in it; it brings up loopback there. In
// the public and allowList modes it then gives the sandbox a link to the
// uplink and a firewall (packages uplink and netfilter), in
// parallel with the rest of the start. The sandbox's resolv.conf names
// netfilter.SandboxDNS.
//
// Without root the init makes its own network namespace (owned by the
// sandbox's user namespace) and brings its loopback up itself; in the
// public and allowList modes it also makes the TUN device of the
// user-mode network (usernet.go), whose policy a host process applies.

// sandboxLink returns the addresses of the link of sandbox n (package
// netfilter's address plan).
var sandboxLink = netfilter.SandboxLink

// hostMakesNetns reports whether the host makes the sandboxes' network
// namespaces (it runs as root).
func hostMakesNetns() bool { return os.Geteuid() == 0 }

// networkCloneFlags returns the clone flags of the init: CLONE_NEWNET
// when the sandbox has a network of its own that the init makes.
func networkCloneFlags(c *Config) uintptr {
	if c.ownNetwork() && !hostMakesNetns() {
		return unix.CLONE_NEWNET
	}
	return 0
}

// checkNetworkAvailable explains why the network mode of c cannot be had
// by this process, or returns nil.
func checkNetworkAvailable(c *Config) error {
	if hostMakesNetns() || !c.needsInterface() {
		return nil
	}
	tunErr := tunUsable()
	if tunErr == nil {
		return nil
	}
	return networkNeedsRootError(c, tunErr)
}

// checkLiveNetwork explains why the network policy of the running
// sandbox m cannot become next's while it runs, or returns nil: without
// root, the user-mode network's mode and Network.Allow are those the
// sandbox started with.
func checkLiveNetwork(m *meta, next *Config) error {
	if hostMakesNetns() || !m.Config.needsInterface() && !next.needsInterface() {
		return nil
	}
	if networkMode(&m.Config) == networkMode(next) && slices.Equal(m.Config.Network.Allow, next.Network.Allow) {
		return nil
	}
	return fmt.Errorf("%w: without root, the sandbox's user-mode network keeps the Network.Mode and Network.Allow it started with (%s): stop the sandbox, change them, and start it again", sandbox.ErrIsolationUnavailable, networkMode(&m.Config))
}

// newNetRecord returns the record of the network the host makes for the
// sandbox shaped by c, or nil when it makes none.
func (s *Sandbox) newNetRecord(c *Config) *netRecord {
	if !c.ownNetwork() || !hostMakesNetns() {
		return nil
	}
	return netRecordFor(s.netTest)
}

// netRecordFor returns the record of a network the host is about to make,
// linked to the uplink of t (the host's unless a test says otherwise).
func netRecordFor(t netTestHooks) *netRecord {
	r := &netRecord{Uplink: t.Uplink}
	if t.Resolver.IsValid() {
		r.Resolver = t.Resolver.String()
	}
	return r
}

// initNet is what the init is told about its network.
type initNet struct {
	// Nameserver is the address its resolv.conf names; "": keep the
	// host's file.
	Nameserver string `json:"nameserver,omitempty"`
	// LoopbackUp: the init made the namespace and brings loopback up.
	LoopbackUp bool `json:"loopbackUp,omitempty"`
	// Tun: the init makes the user-mode network's TUN device and hands
	// it to the host.
	Tun bool `json:"tun,omitempty"`
}

// initNetOf returns what the init of the sandbox m is told about its
// network.
func initNetOf(m *meta) initNet {
	switch {
	case m.Network != nil:
		return initNet{Nameserver: netfilter.SandboxDNS.String()}
	case usesUserNet(&m.Config):
		return initNet{Nameserver: usernetResolver.String(), LoopbackUp: true, Tun: true}
	case m.Config.ownNetwork():
		return initNet{LoopbackUp: true}
	}
	return initNet{}
}

// setupNetwork runs in the init: it brings up loopback in a network
// namespace it made.
func setupNetwork(n initNet) error {
	if !n.LoopbackUp {
		return nil
	}
	return loopbackUp()
}

// netBoot is the network of a starting sandbox, host side.
type netBoot struct {
	m  *meta
	ns *os.File // the namespace the host made; nil otherwise
	// done carries the result of the plumbing started by start (nil when
	// none was), which records what it made in rec, a copy of m.Network:
	// m is written to disk meanwhile.
	done chan error
	rec  *netRecord
}

// startInit starts cmd, the init of the sandbox m. When the host makes the
// sandbox's network namespace (m.Network), or the sandbox has a host id
// range of its own (m.HostIDs), cmd starts from a throwaway OS thread
// (onThrowawayThread) which first makes the namespace, owned by the
// host's user namespace, so the sandbox's root cannot change it, then
// takes the range's first uid as its effective uid (becomeOwner), so that
// the new user namespace belongs to that uid rather than to root: the
// kernel charges per-user counters (inotify instances, key quotas) to the
// namespace's owner, which must not be shared by every sandbox. Both
// changes are the thread's alone and end with it.
//
// The sandbox's link and firewall are made (netBoot.start) as soon as its
// namespace exists, while the init is forked and starts.
func startInit(ctx context.Context, cmd *exec.Cmd, m *meta) (*netBoot, error) {
	b := &netBoot{m: m}
	owned := ownedByRange(m.HostIDs)
	if m.Network == nil && !owned {
		return b, cmd.Start()
	}
	if owned {
		defer restoreDumpable()()
	}
	err := onThrowawayThread(func() error {
		if m.Network != nil {
			ns, err := newNetnsHere()
			if err != nil {
				return err
			}
			b.ns = ns
			b.start(ctx)
		}
		if owned {
			if err := becomeOwner(m.HostIDs.First); err != nil {
				return err
			}
		}
		// The child is forked by this thread, into its namespace.
		return cmd.Start()
	})
	return b, err
}

// start gives the sandbox its link and firewall when its mode needs them,
// in the background: the init sets itself up meanwhile (it needs no
// network for that), and finish waits for it.
func (b *netBoot) start(ctx context.Context) {
	if b.ns == nil || !b.m.Config.needsInterface() {
		return
	}
	rec := *b.m.Network
	m := *b.m
	m.Network = &rec
	b.rec, b.done = &rec, make(chan error, 1)
	go func() { b.done <- plumb(ctx, b.ns, &m) }()
}

// finish waits for the plumbing that start began, records what it made
// in the sandbox's m.Network, and releases the host's handle on the
// namespace (the init holds it).
func (b *netBoot) finish() error {
	if b == nil {
		return nil
	}
	var err error
	if b.done != nil {
		if err = <-b.done; err == nil {
			*b.m.Network = *b.rec
		}
		b.done = nil
	}
	if b.ns != nil {
		b.ns.Close()
		b.ns = nil
	}
	return err
}

// plumb gives the sandbox m, whose namespace is sbx, its link and
// firewall, recording them in m.Network.
func plumb(ctx context.Context, sbx *os.File, m *meta) error {
	u, err := uplink.Open(ctx, m.Network.Uplink)
	if err != nil {
		return err
	}
	defer u.Close()
	return attach(u, sbx, m)
}

// attach gives the sandbox m, whose namespace is sbx, its link to u and
// its firewall, and records them in m.Network.
func attach(u *uplink.Uplink, sbx *os.File, m *meta) error {
	rec := m.Network
	rec.IPv6 = u.ForwardsIPv6()
	if rec.Resolver == "" {
		if r, ok := hostResolver(rec.IPv6); ok {
			rec.Resolver = r.String()
		}
	}
	nets, err := u.HostNets()
	if err != nil {
		return err
	}
	rec.HostNets = nets
	n, ifindex, err := u.AddLink(sbx, rec.IPv6)
	if err != nil {
		return err
	}
	rec.Link, rec.Ifindex = n, ifindex
	if err := u.Forward(); err != nil {
		return err
	}
	if err := netfilter.New(u.NFT(), n).Create(policyOf(m)); err != nil {
		return err
	}
	// The sandbox's table (Forward wrote the shared table's changes).
	if err := u.NFT().Flush(); err != nil {
		return fmt.Errorf("sandbox network: write the firewall: %w", err)
	}
	return nil
}

// policyOf returns the firewall policy of the sandbox m, which has a link.
func policyOf(m *meta) *netfilter.Policy {
	p := &netfilter.Policy{Link: m.Network.Link, Mode: networkMode(&m.Config), IPv6: m.Network.IPv6, Ports: m.Ports, HostNets: m.Network.HostNets}
	p.Allow = m.Config.Network.Allow // validated before
	p.Resolver, _ = netip.ParseAddr(m.Network.Resolver)
	return p
}

// hostResolver returns the first nameserver of the host's resolv.conf
// that a sandbox can use: IPv4 (IPv6 only when the sandbox has it).
func hostResolver(v6 bool) (netip.Addr, bool) {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return netip.Addr{}, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err == nil && (a.Is4() || v6 && a.Is6() && a.Zone() == "") {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// teardownNetwork removes the link and firewall of the sandbox m, whose
// init has ended, and forgets them; when it was the last sandbox of its
// uplink, it undoes what agentbox changed there.
func teardownNetwork(ctx context.Context, m *meta) {
	rec := m.Network
	m.Network = nil
	if rec == nil || rec.Link == 0 {
		return
	}
	u, err := uplink.Open(ctx, rec.Uplink)
	if err != nil {
		return // a test's uplink that is gone, and its links with it
	}
	defer u.Close()
	u.DelLink(rec.Link, rec.Ifindex)
	_ = u.Cleanup()
}

// applyNetwork puts the network policy of next in place on the running
// sandbox m (whose Config is the current one): the link and firewall,
// and the shared egress proxy. It updates m.
func (s *Sandbox) applyNetwork(ctx context.Context, dir string, m *meta, next Config) error {
	prev := m.Config
	rec := m.Network
	if rec == nil && networkMode(&prev) != networkMode(&next) {
		return fmt.Errorf("%w: a sandbox started without root cannot change its network mode while it runs (only its domain list); stop it, change the settings, and start it again", sandbox.ErrUnsupported)
	}
	if rec != nil {
		if err := s.applyLink(ctx, m, next); err != nil {
			return err
		}
	}
	m.Config = next
	if err := s.applyEgressProxy(ctx, dir, m); err != nil {
		return err
	}
	return s.syncRedirect(ctx, m)
}

// applyLink gives the sandbox m the link and firewall next needs, or
// takes them away, or rewrites the firewall's policy.
func (s *Sandbox) applyLink(ctx context.Context, m *meta, next Config) error {
	rec := m.Network
	u, err := uplink.Open(ctx, rec.Uplink)
	if err != nil {
		return err
	}
	defer u.Close()
	switch {
	case !next.needsInterface():
		if rec.Link != 0 {
			u.DelLink(rec.Link, rec.Ifindex)
			rec.Link, rec.Ifindex = 0, 0
			return u.Cleanup()
		}
		return nil
	case rec.Link == 0:
		sbx, err := openInitNetns(m.Init)
		if err != nil {
			return err
		}
		defer sbx.Close()
		cur := *m
		cur.Config = next
		return attach(u, sbx, &cur)
	}
	cur := *m
	cur.Config = next
	f, err := netfilter.Existing(u.NFT(), rec.Link)
	if err != nil {
		return err
	}
	if err := f.SetPolicy(policyOf(&cur)); err != nil {
		return err
	}
	return u.NFT().Flush()
}

// applyPorts rewrites the published ports of the running sandbox m.
func applyPorts(ctx context.Context, m *meta) error {
	rec := m.Network
	if rec == nil || rec.Link == 0 {
		return nil
	}
	u, err := uplink.Open(ctx, rec.Uplink)
	if err != nil {
		return err
	}
	defer u.Close()
	f, err := netfilter.Existing(u.NFT(), rec.Link)
	if err != nil {
		return err
	}
	f.SetPorts(policyOf(m))
	return u.NFT().Flush()
}

// addNetworkState adds to n what the running sandbox m's network shows:
// its firewall's refusals, its egress proxy's policy log, its ports.
func addNetworkState(dir string, m *meta, n *sandbox.NetworkInfo) {
	n.Ports = m.Ports
	addPolicyLog(dir, m, n)
	addUserNetState(dir, m, n)
	if !m.alive() {
		return
	}
	if rec := m.Network; rec != nil && rec.Link != 0 {
		_ = uplink.Read(rec.Uplink, func(c *nftables.Conn) (err error) {
			n.RefusedPackets, err = netfilter.RefusedPackets(c, rec.Link)
			return err
		})
		if !rec.IPv6 {
			n.Note = joinNote(n.Note, "no IPv6: the host does not forward IPv6")
		}
		if networkMode(&m.Config) == sandbox.NetworkPublic && rec.Resolver == "" {
			n.Note = joinNote(n.Note, "no DNS: the host's resolv.conf names no usable nameserver")
		}
	}
}
