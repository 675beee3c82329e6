package netfilter

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The secrets' redirect: a table written by the host IN THE SANDBOX'S
// network namespace (which the host made, so the sandbox's root holds no
// capability over it and cannot change it) for a sandbox in the public or
// allowList mode that holds secrets. Reading `nft list table inet
// agentbox-secrets` there:
//
//	chain output   hook output (nat): what the proxy's upstream sockets send
//	               (meta skuid RedirectExemptUID) returns, loopback
//	               destinations return, tcp dport {80, 443} redirect to
//	               :RedirectPort, IPv4 and IPv6
//
// The redirected connections reach the listening sockets of the
// sandbox's egress proxy on 127.0.0.1 / [::1] RedirectPort, which reads
// their original destination (SO_ORIGINAL_DST).

// RedirectTableName is the table of the redirect in a sandbox's namespace.
const RedirectTableName = "agentbox-secrets"

// RedirectPort is the port the redirected connections reach.
const RedirectPort = 3129

// RedirectExemptUID is the uid (on the host) of the sockets that are not
// redirected: those of the proxy's upstream connections.
const RedirectExemptUID = 65534

// RedirectPorts are the destination ports redirected.
var RedirectPorts = []uint16{80, 443}

// InstallRedirect writes (or rewrites) the redirect table in the network
// namespace ns, in one batch.
func InstallRedirect(ns *os.File) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return fmt.Errorf("secrets redirect: %w", err)
	}
	t := &nftables.Table{Name: RedirectTableName, Family: nftables.TableFamilyINet}
	c.AddTable(t)
	c.DelTable(t) // rewritten whole: the add makes the delete never fail
	c.AddTable(t)
	ch := c.AddChain(&nftables.Chain{Name: "output", Table: t, Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Type: nftables.ChainTypeNAT})
	rule := func(e ...[]expr.Any) {
		var r rules
		for _, x := range e {
			r = r.add(x...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r})
	}
	ret := []expr.Any{verdict(expr.VerdictReturn)}
	rule([]expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(RedirectExemptUID)},
	}, ret)
	rule([]expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")}}, ret)
	for _, v6 := range []bool{false, true} {
		lo := "127.0.0.0/8"
		if v6 {
			lo = "::1/128"
		}
		rule(addrIn(netip.MustParsePrefix(lo), false), ret)
		for _, port := range RedirectPorts {
			fam := byte(unix.NFPROTO_IPV4)
			if v6 {
				fam = unix.NFPROTO_IPV6
			}
			rule(nfproto(fam), l4proto(unix.IPPROTO_TCP), dport(port), []expr.Any{
				&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(RedirectPort)},
				&expr.Redir{RegisterProtoMin: 1},
			})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("secrets redirect: write the table: %w", err)
	}
	return nil
}

// RemoveRedirect deletes the redirect table of the network namespace ns;
// it is not an error that there is none.
func RemoveRedirect(ns *os.File) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return fmt.Errorf("secrets redirect: %w", err)
	}
	c.DelTable(&nftables.Table{Name: RedirectTableName, Family: nftables.TableFamilyINet})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("secrets redirect: delete the table: %w", err)
	}
	return nil
}

// HasRedirect reports whether the network namespace ns has the redirect
// table.
func HasRedirect(ns *os.File) (bool, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return false, err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, err
	}
	for _, t := range tables {
		if t.Name == RedirectTableName {
			return true, nil
		}
	}
	return false, nil
}
