package uplink

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local/internal/netfilter"
	"github.com/agentbox-dev/agentbox/local/internal/netns"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestRetryDump: an interrupted dump is asked again, up to ten times;
// other errors come back at once.
func TestRetryDump(t *testing.T) {
	calls := 0
	v, err := retryDump(func() (int, error) {
		calls++
		if calls < 3 {
			return 0, netlink.ErrDumpInterrupted
		}
		return calls, nil
	})
	if err != nil || v != 3 {
		t.Errorf("after two interruptions: %d, %v; want 3, nil", v, err)
	}
	calls = 0
	if _, err := retryDump(func() (int, error) { calls++; return 0, netlink.ErrDumpInterrupted }); !errors.Is(err, netlink.ErrDumpInterrupted) || calls != 10 {
		t.Errorf("always interrupted: %v after %d calls; want the interruption after 10", err, calls)
	}
	calls = 0
	other := errors.New("other")
	if _, err := retryDump(func() (int, error) { calls++; return 0, other }); !errors.Is(err, other) || calls != 1 {
		t.Errorf("another error: %v after %d calls", err, calls)
	}
}

// newNetns returns a network namespace of the test's, closed at its end.
func newNetns(t *testing.T) *os.File {
	t.Helper()
	var ns *os.File
	if err := netns.OnThrowawayThread(func() (err error) { ns, err = netns.NewHere(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// TestLinkLifecycle, in an uplink namespace of the test's: a link gets
// both ends addressed and the sandbox's default route; the uplink's own
// networks leave out the sandboxes' links and loopback; removing the link and
// cleaning up leaves no table of agentbox's.
func TestLinkLifecycle(t *testing.T) {
	testenv.NeedRoot(t, "making network namespaces and links")
	ctx := context.Background()
	up, sbx := newNetns(t), newNetns(t)
	path := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), up.Fd())
	u, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if err := u.nl.AddrAdd(mustLink(t, u.nl, "lo"), addr(netip.MustParseAddr("192.0.2.1"), 24)); err != nil {
		t.Fatal(err)
	}
	n, ifindex, err := u.AddLink(sbx, false)
	if err != nil {
		t.Fatal(err)
	}
	if l := mustLink(t, u.nl, netfilter.LinkName(n)); l.Attrs().Index != ifindex {
		t.Errorf("link %s has index %d, AddLink said %d", netfilter.LinkName(n), l.Attrs().Index, ifindex)
	}
	if v, err := u.sysctl("net/ipv4/conf/" + netfilter.LinkName(n) + "/forwarding"); err != nil || v != "1" {
		t.Errorf("forwarding on the link: %q, %v", v, err)
	}
	nets, err := u.HostNets()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range nets {
		if netip.MustParsePrefix("10.231.0.0/16").Overlaps(p) || p == netip.MustParsePrefix("192.0.2.0/24") {
			t.Errorf("the uplink's networks %v hold a sandbox link's or loopback's", nets)
		}
	}
	if err := u.Forward(); err != nil {
		t.Fatal(err)
	}
	if err := netfilter.New(u.NFT(), n).Create(&netfilter.Policy{Link: n, Mode: sandbox.NetworkPublic}); err != nil {
		t.Fatal(err)
	}
	if err := u.NFT().Flush(); err != nil {
		t.Fatal(err)
	}
	u.DelLink(n, ifindex)
	if err := u.Cleanup(); err != nil {
		t.Fatal(err)
	}
	tables, err := u.NFT().ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if strings.HasPrefix(tb.Name, netfilter.SharedTableName) {
			t.Errorf("table %s left after the last link went", tb.Name)
		}
	}
	if _, err := u.nl.LinkByName(netfilter.LinkName(n)); err == nil {
		t.Errorf("link %s left after DelLink", netfilter.LinkName(n))
	}
}

func mustLink(t *testing.T, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
