package netfilter

import (
	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// FlippedSet names the set of the shared table that holds the interfaces
// agentbox turned IPv4 forwarding on for (their names, IfNameKey).
const FlippedSet = "flipped"

// IfNameKey returns the key of an interface name in a set of type
// TypeIFName (the name, zero-padded to 16 bytes).
func IfNameKey(name string) []byte { return ifname(name) }

// SharedTable adds (in the pending batch of c) the table of the uplink as
// a whole, its set of the interfaces agentbox turned forwarding on for
// (FlippedSet), and the rule that keeps them from forwarding anything
// else: new connections that came in through them and go to no sandbox
// (not destination-NATed) are dropped.
func SharedTable(c *nftables.Conn) (*nftables.Table, *nftables.Set) {
	t := c.AddTable(&nftables.Table{Name: SharedTableName, Family: nftables.TableFamilyINet})
	s := &nftables.Set{Table: t, Name: FlippedSet, KeyType: nftables.TypeIFName}
	_ = c.AddSet(s, nil)
	existing, _ := c.ListChain(t, "forward")
	if existing == nil {
		ch := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Type: nftables.ChainTypeFilter})
		var r rules
		r = r.add(&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
		r = r.add(ifIs(expr.MetaKeyOIFNAME, LinkPrefix+"*", false)...)
		r = r.add(ctBits(expr.CtKeySTATE, expr.CtStateBitNEW, false)...)
		r = r.add(ctBits(expr.CtKeySTATUS, ipsDstNAT, true)...)
		r = r.add(verdict(expr.VerdictDrop))
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r})
	}
	return t, s
}

// Publisher returns the link of the sandbox whose table publishes host
// port (a DNAT rule of its chain output, SetPorts), or 0.
func Publisher(c *nftables.Conn, port int) (int, error) {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return 0, err
	}
	want := binaryutil.BigEndian.PutUint16(uint16(port))
	for _, t := range tables {
		n, ok := TableIndex(t.Name)
		if !ok {
			continue
		}
		rs, err := c.GetRules(t, &nftables.Chain{Name: "output", Table: t})
		if err != nil {
			continue
		}
		for _, r := range rs {
			if matchesDport(r.Exprs, want) {
				return n, nil
			}
		}
	}
	return 0, nil
}

// matchesDport reports whether the expressions of a rule compare the
// transport destination port with want.
func matchesDport(exprs []expr.Any, want []byte) bool {
	for i, e := range exprs {
		p, ok := e.(*expr.Payload)
		if !ok || p.Base != expr.PayloadBaseTransportHeader || p.Offset != 2 || i+1 >= len(exprs) {
			continue
		}
		if cmp, ok := exprs[i+1].(*expr.Cmp); ok && string(cmp.Data) == string(want) {
			return true
		}
	}
	return false
}
