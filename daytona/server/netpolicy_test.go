package server

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestSameNetworkAnswers feeds the same allow lists, good and bad, to
// every engine and edge: agentbox serve (its wire edge and its local
// engine's check), package local (local.New) and the daytona client
// (daytona.New), in Daytona's wire form (parsed as the CLI and serve
// parse it) and as typed policies built by hand. Each gives the same
// answer: refused, or accepted with the same canonical lists. The one
// difference is named: local refuses its sandboxes' own link range
// (10.231.0.0/16), which is no other engine's.
func TestSameNetworkAnswers(t *testing.T) {
	var eleven []string
	for i := range 11 {
		eleven = append(eleven, fmt.Sprintf("203.0.113.%d", i))
	}
	wire := []struct{ allow, domains string }{
		{"203.0.113.7", ""},                                // bare IPv4
		{"203.0.113.0/24", ""},                             // CIDR
		{"2001:DB8::/32,2001:db8::1", ""},                  // IPv6, bare and CIDR
		{"", "PyPI.org.,*.github.com"},                     // domain, wildcard domain
		{"203.0.113.0/24,203.0.113.0/24", "a.test,A.test"}, // duplicates
		{" 203.0.113.0/24 , ,198.51.100.7,", " , x.test"},  // empty items
		{strings.Join(eleven[:10], ","), ""},               // the cap
		// Refused from here on.
		{strings.Join(eleven, ","), ""}, // too many
		{"nonsense", ""},                // garbage
		{"203.0.113.1/24", ""},          // host bits
		{"169.254.169.254", ""},         // never reachable
		{"example.com", ""},             // a name among CIDRs
		{"", "10.0.0.0/8"},              // a CIDR among names
		{"", "bad domain"},              // garbage name
		{"", "*"},                       // bare wildcard
		{" , ", ""},                     // empty list
		{"", ","},                       // empty list
	}
	for i, w := range wire {
		var p sandbox.NetworkPolicy
		var err error
		if p, err = sandbox.ParseNetworkPolicy(false, w.allow, w.domains); err != nil {
			p = sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList} // refused at the wire: every engine must refuse the typed form too
			if w.allow != "" {
				p.Allow = []netip.Prefix{{}}
			}
		}
		got := sameAnswers(t, fmt.Sprintf("%q %q", w.allow, w.domains), w.allow, w.domains, p)
		if good := i < 7; good != strings.HasPrefix(got, "accepted ") {
			t.Errorf("%q %q: %s", w.allow, w.domains, got)
		}
	}
	pfx := netip.MustParsePrefix
	for _, p := range []sandbox.NetworkPolicy{
		{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{pfx("203.0.113.0/24"), pfx("203.0.113.0/24")}, Domains: []string{"PyPI.org."}},
		{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{pfx("::ffff:203.0.113.0/120")}},
		{Mode: sandbox.NetworkBlocked},
		{Mode: sandbox.NetworkBlocked, Domains: []string{"pypi.org"}},
		{},
	} {
		_, a, d := p.Wire()
		sameAnswers(t, fmt.Sprintf("%+v", p), a, d, p)
	}
	// An allow list of nothing has no wire form (it reads as the
	// default): the engines that take typed policies refuse it alike.
	empty := sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList}
	if loc, day := localAnswer(t, empty), daytonaAnswer(t, empty); loc != "refused" || day != "refused" {
		t.Errorf("an empty allow list: local %s, daytona %s", loc, day)
	}
	// The named difference.
	own := sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{pfx("10.231.0.0/24")}}
	if _, err := local.New(local.Options{StateDir: t.TempDir(), Config: local.Config{Network: own}}); err == nil || !strings.Contains(err.Error(), "sandboxes' own links") {
		t.Errorf("local with its own link range: %v", err)
	}
	if got := daytonaAnswer(t, own); got != "accepted allowList 10.231.0.0/24" {
		t.Errorf("daytona with 10.231.0.0/24: %s", got)
	}
}

// sameAnswers checks that serve (given the wire lists allow and domains,
// as it gets them), local and daytona (given p) answer alike.
func sameAnswers(t *testing.T, name, allow, domains string, p sandbox.NetworkPolicy) string {
	t.Helper()
	srv, loc, day := serveAnswer(t, p.Mode == sandbox.NetworkBlocked, allow, domains), localAnswer(t, p), daytonaAnswer(t, p)
	if srv != loc || loc != day {
		t.Errorf("%s: serve %s; local %s; daytona %s", name, srv, loc, day)
	}
	return loc
}

// answer says whether err refused, and otherwise the policy accepted.
func answer(p sandbox.NetworkPolicy, err error) string {
	if err != nil {
		return "refused"
	}
	return "accepted " + p.String()
}

// serveAnswer is agentbox serve's answer to a create with these wire
// fields: its wire edge, then its local engine's check (no sandbox is
// made: create returns the function that would make it).
func serveAnswer(t *testing.T, blockAll bool, allow, domains string) string {
	s := &Server{now: time.Now}
	rec, sp, err := s.newRecord("org", &createSandbox{NetworkBlockAll: blockAll, NetworkAllowList: allow, DomainAllowList: domains})
	if err != nil {
		return answer(sandbox.NetworkPolicy{}, err)
	}
	if _, err := (localEngine{stateDir: t.TempDir()}).create(rec.id, sp); err != nil {
		return answer(sandbox.NetworkPolicy{}, err)
	}
	// An update with the same fields answers alike.
	up, err := (&networkSettings{NetworkBlockAll: &blockAll, NetworkAllowList: &allow, DomainAllowList: &domains}).apply(sandbox.NetworkPolicy{})
	if err != nil || !up.Equal(rec.network) {
		t.Errorf("serve: an update with %q %q gives %v, %v; a create %v", allow, domains, up, err, rec.network)
	}
	return answer(rec.network, nil)
}

// localAnswer is package local's answer to a sandbox with p (nothing is
// made: the metadata is written at Start).
func localAnswer(t *testing.T, p sandbox.NetworkPolicy) string {
	sb, err := local.New(local.Options{StateDir: t.TempDir(), Config: local.Config{Network: p}})
	if err != nil {
		if !strings.Contains(err.Error(), "Config.Network") {
			t.Errorf("local's error does not name the field: %v", err)
		}
		return "refused"
	}
	info, err := sb.Info(context.Background())
	return answer(policyOf(info.Network), err)
}

// daytonaAnswer is the daytona client's answer to a sandbox with p (New
// sends nothing).
func daytonaAnswer(t *testing.T, p sandbox.NetworkPolicy) string {
	c, err := daytona.NewClient(daytona.Config{APIKey: "k", APIURL: "http://127.0.0.1:1/api"})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := daytona.New(daytona.Options{Client: c, Network: p})
	if err != nil {
		if !strings.Contains(err.Error(), "Options.Network") {
			t.Errorf("daytona's error does not name the field: %v", err)
		}
		return "refused"
	}
	info, err := sb.Info(context.Background())
	return answer(policyOf(info.Network), err)
}

// policyOf reads back the policy Info tells.
func policyOf(n *sandbox.NetworkInfo) sandbox.NetworkPolicy {
	p, err := sandbox.ParseNetworkPolicy(n.Mode == sandbox.NetworkBlocked, strings.Join(n.AllowList, ","), strings.Join(n.DomainAllowList, ","))
	if err != nil {
		panic(err)
	}
	return p
}
