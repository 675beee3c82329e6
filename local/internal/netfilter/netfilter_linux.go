package netfilter

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The sandbox's firewall: one nftables table per sandbox in the uplink
// namespace, "inet agentbox-<n>" for the sandbox whose link is
// agentbox<n>. Reading `nft list table inet agentbox-<n>`:
//
//	set blocked4, blocked6   ranges the sandbox never reaches (intervals):
//	                         neverRanges (cloud host addresses included), and
//	                         in the public mode privateRanges and the host's
//	                         own networks (netRecord.HostNets)
//	set allow4, allow6       the NetworkAllowList (allowList mode)
//	counter refused          packets refused
//	chain refuse             count, then answer: TCP reset, or ICMP administratively prohibited
//	chain egress             what the sandbox sends out: DNS to the host's resolver (public
//	                         mode), the blocked sets refused, then accept (public) or the
//	                         allow sets accepted and the rest refused (allowList, where
//	                         port 53 is refused first: no DNS query leaves)
//	chain forward            hook forward: replies to the sandbox pass, anything else
//	                         towards it is refused; what it sends goes through egress
//	chain input              hook input: the host's own addresses refuse the sandbox
//	                         (replies, IPv6 neighbour discovery, and DNS to a resolver
//	                         on the host excepted)
//	chain prerouting         hook prerouting (nat): DNS to SandboxDNS goes to the host's resolver
//	chain postrouting        hook postrouting (nat): masquerade what leaves; what the
//	                         published ports bring from the host's loopback appears to
//	                         come from the gateway
//	chain output             hook output (nat): the published ports, 127.0.0.1:PORT → sandbox
//
// The egress policy is checked on every packet, not only on new
// connections, so that a policy change cuts the connections it no longer
// allows. The table is written in one batch (atomically), and rewritten
// the same way when the policy or the ports change.

// TableName returns the name of the table of sandbox link n.
func TableName(n int) string { return "agentbox-" + strconv.Itoa(n) }

// LinkName returns the host-side name of the link of sandbox n.
func LinkName(n int) string { return LinkPrefix + strconv.Itoa(n) }

// LinkPrefix starts the name of every sandbox link on the host.
const LinkPrefix = "agentbox"

// SharedTableName is the table of the uplink as a whole (package uplink).
const SharedTableName = "agentbox"

// Policy is what the firewall of one sandbox enforces.
type Policy struct {
	Link     int                 // n of the link agentbox<n>
	Mode     sandbox.NetworkMode // the mode as Info tells it
	Allow    []netip.Prefix      // the allow list (validated, canonical)
	Resolver netip.Addr          // the DNS resolver the gateway forwards to (public mode); invalid: none
	HostNets []netip.Prefix      // the networks the uplink sits on: refused in the public mode
	IPv6     bool                // the link carries IPv6
	Ports    []sandbox.PublishedPort
}

// rules collects the expressions of rules.
type rules []expr.Any

func (r rules) add(e ...expr.Any) rules { return append(r, e...) }

func ifname(s string) []byte {
	b := make([]byte, 16)
	copy(b, s)
	return b
}

// ifIs matches the input (key MetaKeyIIFNAME) or output interface name;
// a name ending in '*' matches every name it starts.
func ifIs(key expr.MetaKey, name string, eq bool) []expr.Any {
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	data := ifname(name)
	if p, ok := strings.CutSuffix(name, "*"); ok {
		data = []byte(p)
	}
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: data}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

// addrField loads the source (src) or destination address of a's family.
func addrField(v6, src bool) []expr.Any {
	fam, off, n := byte(unix.NFPROTO_IPV4), uint32(16), uint32(4)
	if v6 {
		fam, off, n = unix.NFPROTO_IPV6, 24, 16
	}
	if src {
		off -= n
	}
	return append(nfproto(fam), &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n})
}

// addrIs matches the source or destination address a.
func addrIs(a netip.Addr, src bool) []expr.Any {
	return append(addrField(a.Is6(), src), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()})
}

// addrIn matches a source or destination address in the prefix p.
func addrIn(p netip.Prefix, src bool) []expr.Any {
	mask := make([]byte, p.Addr().BitLen()/8)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return append(addrField(p.Addr().Is6(), src),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(mask)), Mask: mask, Xor: make([]byte, len(mask))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()})
}

// daddrInSet matches a destination address in s (of v6's family).
func daddrInSet(s *nftables.Set, v6 bool) []expr.Any {
	return append(addrField(v6, false), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
}

// dport matches the transport destination port (after an l4proto match).
func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// ctBits matches when the conntrack key (state or status) has one of the
// bits of mask (or, with none, has none of them).
func ctBits(key expr.CtKey, mask uint32, none bool) []expr.Any {
	op := expr.CmpOpNeq
	if none {
		op = expr.CmpOpEq
	}
	return []expr.Any{
		&expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: make([]byte, 4)},
	}
}

// ipsDstNAT is the conntrack status bit of a destination-NATed connection.
const ipsDstNAT = 1 << 5

func replies() []expr.Any {
	return ctBits(expr.CtKeySTATE, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, false)
}

func verdict(k expr.VerdictKind) *expr.Verdict { return &expr.Verdict{Kind: k} }

func jump(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }

// refusedCounter names the counter object of refused packets.
const refusedCounter = "refused"

// Firewall is the table of one sandbox, being written in one batch
// (flushed by the caller on the connection it was made with).
type Firewall struct {
	c      *nftables.Conn
	t      *nftables.Table
	chains map[string]*nftables.Chain
}

// New returns the table of link n, to be (re)written on c.
func New(c *nftables.Conn, n int) *Firewall {
	return &Firewall{c: c, t: &nftables.Table{Name: TableName(n), Family: nftables.TableFamilyINet}, chains: map[string]*nftables.Chain{}}
}

func (f *Firewall) rule(chain string, e ...[]expr.Any) {
	var r rules
	for _, x := range e {
		r = r.add(x...)
	}
	f.c.AddRule(&nftables.Rule{Table: f.t, Chain: f.chains[chain], Exprs: r})
}

func (f *Firewall) chain(name string, hook *nftables.ChainHook, prio *nftables.ChainPriority, typ nftables.ChainType) {
	c := &nftables.Chain{Name: name, Table: f.t}
	if hook != nil {
		c.Hooknum, c.Priority, c.Type = hook, prio, typ
	}
	f.chains[name] = f.c.AddChain(c)
}

// Create writes the whole table of p (replacing one left by a sandbox
// that had the link before).
func (f *Firewall) Create(p *Policy) error {
	f.c.AddTable(f.t)
	f.c.DelTable(f.t) // empty whatever is there
	f.c.AddTable(f.t)
	f.c.AddObj(&nftables.CounterObj{Table: f.t, Name: refusedCounter})
	link := LinkName(p.Link)
	f.chain("refuse", nil, nil, "")
	f.rule("refuse", []expr.Any{&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: refusedCounter}})
	f.rule("refuse", l4proto(unix.IPPROTO_TCP), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})
	f.rule("refuse", []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}})
	f.chain("egress", nil, nil, "")
	f.chain("forward", nftables.ChainHookForward, nftables.ChainPriorityFilter, nftables.ChainTypeFilter)
	f.rule("forward", ifIs(expr.MetaKeyOIFNAME, link, true), replies(), []expr.Any{verdict(expr.VerdictAccept)})
	f.rule("forward", ifIs(expr.MetaKeyOIFNAME, link, true), []expr.Any{jump("refuse")})
	f.rule("forward", ifIs(expr.MetaKeyIIFNAME, link, true), []expr.Any{jump("egress")})
	f.chain("input", nftables.ChainHookInput, nftables.ChainPriorityFilter, nftables.ChainTypeFilter)
	f.rule("input", ifIs(expr.MetaKeyIIFNAME, link, true), replies(), []expr.Any{verdict(expr.VerdictAccept)})
	// IPv6 neighbour discovery of the gateway.
	for _, typ := range []byte{135, 136} { // neighbour solicitation, advertisement
		f.rule("input", ifIs(expr.MetaKeyIIFNAME, link, true), l4proto(unix.IPPROTO_ICMPV6), []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{typ}},
			verdict(expr.VerdictAccept),
		})
	}
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
		f.rule("input", ifIs(expr.MetaKeyIIFNAME, link, true), l4proto(proto), dport(53), ctBits(expr.CtKeySTATUS, ipsDstNAT, false), []expr.Any{verdict(expr.VerdictAccept)})
	}
	f.rule("input", ifIs(expr.MetaKeyIIFNAME, link, true), []expr.Any{jump("refuse")})
	f.chain("prerouting", nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest, nftables.ChainTypeNAT)
	f.chain("postrouting", nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource, nftables.ChainTypeNAT)
	_, sbx4, _, sbx6 := SandboxLink(p.Link)
	f.rule("postrouting", addrIs(sbx4, true), ifIs(expr.MetaKeyOIFNAME, link, false), []expr.Any{&expr.Masq{}})
	if p.IPv6 {
		f.rule("postrouting", addrIs(sbx6, true), ifIs(expr.MetaKeyOIFNAME, link, false), []expr.Any{&expr.Masq{}})
	}
	f.rule("postrouting", ifIs(expr.MetaKeyOIFNAME, link, true), addrIn(netip.MustParsePrefix("127.0.0.0/8"), true), []expr.Any{&expr.Masq{}})
	f.chain("output", nftables.ChainHookOutput, nftables.ChainPriorityNATDest, nftables.ChainTypeNAT)
	if err := f.SetPolicy(p); err != nil {
		return err
	}
	f.SetPorts(p)
	return nil
}

// SetPolicy writes the egress chain, the sets and the DNS forwarding of p
// (into chains and sets that exist, emptied first).
func (f *Firewall) SetPolicy(p *Policy) error {
	link := LinkName(p.Link)
	f.c.FlushChain(f.chains["egress"])
	f.c.FlushChain(f.chains["prerouting"])
	blocked := [][]addrRange{neverRanges}
	if p.Mode == sandbox.NetworkPublic {
		blocked = append(blocked, privateRanges)
	}
	if p.Mode == sandbox.NetworkPublic {
		blocked = append(blocked, hostRanges(p.HostNets))
	}
	sets := map[string][]netip.Prefix{"blocked": blockedPrefixes(blocked...), "allow": p.Allow}
	if p.Mode == sandbox.NetworkPublic && p.Resolver.Is4() {
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			f.rule("prerouting", ifIs(expr.MetaKeyIIFNAME, link, true), addrIs(SandboxDNS, false), l4proto(proto), dport(53),
				[]expr.Any{
					&expr.Immediate{Register: 1, Data: p.Resolver.AsSlice()},
					&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
				})
			// The forwarded query goes to a resolver in a blocked range.
			f.rule("egress", addrIs(p.Resolver, false), l4proto(proto), dport(53), ctBits(expr.CtKeySTATUS, ipsDstNAT, false), []expr.Any{verdict(expr.VerdictAccept)})
		}
	}
	if p.Mode == sandbox.NetworkAllowList {
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			f.rule("egress", l4proto(proto), dport(53), []expr.Any{jump("refuse")})
		}
	}
	for _, name := range []string{"blocked", "allow"} {
		for _, v6 := range []bool{false, true} {
			s, err := f.set(name, v6, sets[name])
			if err != nil {
				return err
			}
			k := jump("refuse")
			if name == "allow" {
				k = verdict(expr.VerdictAccept)
			}
			f.rule("egress", daddrInSet(s, v6), []expr.Any{k})
		}
	}
	if p.Mode == sandbox.NetworkPublic {
		f.rule("egress", []expr.Any{verdict(expr.VerdictAccept)})
	} else {
		f.rule("egress", []expr.Any{jump("refuse")})
	}
	return nil
}

// set (re)writes the interval set name4 or name6 with the prefixes of its
// family.
func (f *Firewall) set(name string, v6 bool, prefixes []netip.Prefix) (*nftables.Set, error) {
	typ, suffix := nftables.TypeIPAddr, "4"
	if v6 {
		typ, suffix = nftables.TypeIP6Addr, "6"
	}
	var own []netip.Prefix
	for _, p := range prefixes {
		if p.Addr().Is6() == v6 {
			own = append(own, p)
		}
	}
	s := &nftables.Set{Table: f.t, Name: name + suffix, KeyType: typ, Interval: true}
	var elems []nftables.SetElement
	for _, r := range mergePrefixes(own) {
		elems = append(elems, nftables.SetElement{Key: r.first.AsSlice()})
		if end := r.last.Next(); end.IsValid() {
			elems = append(elems, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	if err := f.c.AddSet(s, nil); err != nil {
		return nil, err
	}
	f.c.FlushSet(s)
	if len(elems) > 0 {
		if err := f.c.SetAddElements(s, elems); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SetPorts writes the output chain: one DNAT rule per published port.
func (f *Firewall) SetPorts(p *Policy) {
	f.c.FlushChain(f.chains["output"])
	_, sbx4, _, _ := SandboxLink(p.Link)
	for _, pp := range p.Ports {
		f.rule("output", addrIs(netip.MustParseAddr(pp.HostAddress), false), l4proto(unix.IPPROTO_TCP), dport(uint16(pp.HostPort)),
			[]expr.Any{
				&expr.Immediate{Register: 1, Data: sbx4.AsSlice()},
				&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(uint16(pp.SandboxPort))},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
			})
	}
}

// Existing returns the firewall of table n as it is, its chains known, for
// an update; an error when it does not exist.
func Existing(c *nftables.Conn, n int) (*Firewall, error) {
	f := New(c, n)
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, err
	}
	for _, ch := range chains {
		if ch.Table.Name == f.t.Name {
			f.chains[ch.Name] = ch
		}
	}
	for _, want := range []string{"egress", "prerouting", "output"} {
		if f.chains[want] == nil {
			return nil, fmt.Errorf("firewall table %s lacks its chain %s", f.t.Name, want)
		}
	}
	return f, nil
}

// RefusedPackets reads the counter of refused packets of table n.
func RefusedPackets(c *nftables.Conn, n int) (uint64, error) {
	t := &nftables.Table{Name: TableName(n), Family: nftables.TableFamilyINet}
	o, err := c.GetObject(&nftables.CounterObj{Table: t, Name: refusedCounter})
	if err != nil {
		return 0, err
	}
	if co, ok := o.(*nftables.CounterObj); ok {
		return co.Packets, nil
	}
	return 0, errors.New("not a counter")
}

// TableIndex returns n for a table named agentbox-<n>.
func TableIndex(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "agentbox-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}
