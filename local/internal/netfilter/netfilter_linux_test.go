package netfilter

import (
	"net/netip"
	"os"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local/internal/netns"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestTableIndex: TableIndex reads back what TableName names, and
// nothing else.
func TestTableIndex(t *testing.T) {
	if n, ok := TableIndex(TableName(42)); !ok || n != 42 {
		t.Errorf("TableIndex(TableName(42)) = %d, %v", n, ok)
	}
	for _, name := range []string{SharedTableName, "agentbox-", "agentbox-0", "agentbox-x", "other-3"} {
		if n, ok := TableIndex(name); ok {
			t.Errorf("TableIndex(%q) = %d, want none", name, n)
		}
	}
}

// TestMatchesDport: a rule comparing the transport destination port is
// told by the port it compares with.
func TestMatchesDport(t *testing.T) {
	r := append(l4proto(6), dport(8080)...)
	if !matchesDport(r, binaryutil.BigEndian.PutUint16(8080)) || matchesDport(r, binaryutil.BigEndian.PutUint16(8081)) {
		t.Errorf("matchesDport of a rule of port 8080 is wrong")
	}
	if matchesDport([]expr.Any{&expr.Payload{Base: expr.PayloadBaseTransportHeader, Offset: 2}}, []byte{0, 1}) {
		t.Errorf("a payload without its comparison matched")
	}
}

// TestFirewallInNetns writes the table of a sandbox in a network
// namespace of the test's, then reads it back: its counter of refused
// packets, its chains for an update, and the published port; a policy
// update and a ports update are written the same way.
func TestFirewallInNetns(t *testing.T) {
	testenv.NeedRoot(t, "writing nftables tables in a network namespace")
	var ns *os.File
	if err := netns.OnThrowawayThread(func() (err error) { ns, err = netns.NewHere(); return err }); err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{Link: 7, Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		Ports: []sandbox.PublishedPort{{HostAddress: "127.0.0.1", HostPort: 18080, SandboxPort: 80}}}
	if err := New(c, p.Link).Create(p); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("write the table: %v", err)
	}
	if n, err := RefusedPackets(c, p.Link); err != nil || n != 0 {
		t.Errorf("refused packets %d, %v; want 0", n, err)
	}
	if n, err := Publisher(c, 18080); err != nil || n != p.Link {
		t.Errorf("publisher of 18080: %d, %v; want link %d", n, err, p.Link)
	}
	if n, err := Publisher(c, 18081); err != nil || n != 0 {
		t.Errorf("publisher of 18081: %d, %v; want none", n, err)
	}
	f, err := Existing(c, p.Link)
	if err != nil {
		t.Fatal(err)
	}
	p.Mode, p.Ports = sandbox.NetworkPublic, nil
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	f.SetPorts(p)
	if err := c.Flush(); err != nil {
		t.Fatalf("update the table: %v", err)
	}
	if n, err := Publisher(c, 18080); err != nil || n != 0 {
		t.Errorf("publisher of 18080 after unpublishing: %d, %v; want none", n, err)
	}
	if _, err := Existing(c, 8); err == nil {
		t.Errorf("Existing of a table that is not there: no error")
	}
}
