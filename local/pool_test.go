//go:build linux

package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// poolLab is a state dir with the escape probes, a Pool of size spares
// for it linked to the network lab, and a way to make sandboxes through
// the pool.
type poolLab struct {
	lab      *netLab
	stateDir string
	pool     *local.Pool
}

func newPoolLab(t *testing.T, size int) *poolLab {
	t.Helper()
	lab := newNetLab(t)
	stateDir := newStateDir(t)
	installProbes(t, stateDir)
	pool, err := local.NewPool(local.PoolOptions{StateDir: stateDir, Size: size, RefillDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the sandboxes are destroyed (cleanups run last first).
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Errorf("close the pool: %v", err)
		}
	})
	local.SetPoolTestUplink(pool, lab.UplinkPath, labResolver)
	must(t, pool.Fill(context.Background()))
	return &poolLab{lab: lab, stateDir: stateDir, pool: pool}
}

// sandbox starts a sandbox with c through the pool.
func (pl *poolLab) sandbox(t *testing.T, c local.Config) *local.Sandbox {
	t.Helper()
	c.Volumes = append(c.Volumes, probeConfig(c.Confinement).Volumes...)
	sb := openSandbox(t, local.Options{StateDir: pl.stateDir, Pool: pl.pool, Config: c})
	local.SetNetworkTestUplink(sb, pl.lab.UplinkPath, labResolver)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return sb
}

// uplinkLinks returns the numbers of the sandbox links in the lab's
// uplink.
func (pl *poolLab) uplinkLinks(t *testing.T) map[int]bool {
	t.Helper()
	h := nlHandle(t, pl.lab.uplink)
	links, err := h.LinkList()
	for try := 0; errors.Is(err, netlink.ErrDumpInterrupted) && try < 10; try++ {
		links, err = h.LinkList() // a spare's link made or gone meanwhile
	}
	must(t, err)
	out := map[int]bool{}
	for _, l := range links {
		if n, ok := strings.CutPrefix(l.Attrs().Name, "agentbox"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				out[i] = true
			}
		}
	}
	return out
}

// firstHostUID returns the host uid that uid 0 of the process pid maps to.
func firstHostUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/uid_map")
	must(t, err)
	f := strings.Fields(string(b))
	if len(f) < 3 || f[0] != "0" {
		t.Fatalf("uid_map of %d: %q", pid, b)
	}
	n, err := strconv.Atoi(f[1])
	must(t, err)
	return n
}

// TestSparePoolTake: a new sandbox with the default network takes the
// pool's first spare (its init, link and uid range) and is a sandbox like
// any other: it runs commands, reaches the public internet and nothing
// else; the pool replaces the spare.
func TestSparePoolTake(t *testing.T) {
	pl := newPoolLab(t, 2)
	spares := local.PoolSpares(pl.pool)
	if len(spares) != 2 || spares[0].PID == spares[1].PID || spares[0].Link == spares[1].Link || spares[0].FirstID == spares[1].FirstID {
		t.Fatalf("after Fill(2): spares %+v, want two with their own init, link and range", spares)
	}
	links := pl.uplinkLinks(t)
	for _, sp := range spares {
		if !links[sp.Link] {
			t.Errorf("spare %+v: its link agentbox%d is not in the uplink", sp, sp.Link)
		}
	}
	sb := pl.sandbox(t, local.Config{})
	if pid := local.InitPID(sb); pid != spares[0].PID {
		t.Errorf("the sandbox's init is %d, not the first spare's %d", pid, spares[0].PID)
	}
	if n := local.NetworkLink(sb); n != spares[0].Link {
		t.Errorf("the sandbox's link is %d, not the first spare's %d", n, spares[0].Link)
	}
	if got := firstHostUID(t, local.InitPID(sb)); got != spares[0].FirstID {
		t.Errorf("the sandbox's uid 0 is host uid %d, not the first of the spare's range %d", got, spares[0].FirstID)
	}
	if got := mustRun(t, sb, "id -u; hostname"); got != "0\n"+sb.ID()+"\n" {
		t.Errorf("id -u and hostname in a pooled sandbox: %q, want 0 and its id", got)
	}
	if got := runProbe(t, sb, "tcp", addrPort(labPublic4, pl.lab.Port)); got != "ok" {
		t.Errorf("the public internet from a pooled sandbox: %s", got)
	}
	if got := runProbe(t, sb, "tcp", addrPort(labPrivate["172.16/12"], pl.lab.Port)); got != refusedTCP {
		t.Errorf("a private range from a pooled sandbox: %s, want %s", got, refusedTCP)
	}
	// The spare's range is the sandbox's now, under its id.
	pool := readIDPool(t, pl.stateDir)
	if r, ok := pool[sb.ID()]; !ok || r != spares[0].FirstID {
		t.Errorf("id pool after the take: %v, want %s at %d", pool, sb.ID(), spares[0].FirstID)
	}
	if _, ok := pool[spares[0].Key]; ok {
		t.Errorf("id pool after the take still lists the spare's key %s", spares[0].Key)
	}
	must(t, pl.pool.Fill(context.Background()))
	now := local.PoolSpares(pl.pool)
	if len(now) != 2 || now[0].PID != spares[1].PID || now[1].PID == spares[0].PID {
		t.Errorf("after the take and Fill: spares %+v, want the second then a new one", now)
	}
	must(t, sb.Destroy(context.Background()))
	if pl.uplinkLinks(t)[spares[0].Link] {
		t.Errorf("the destroyed sandbox's link agentbox%d is left in the uplink", spares[0].Link)
	}
}

// TestSparePoolFits: a sandbox with another network mode takes a spare and
// gets its own policy before it runs anything; one with the host's network,
// or that restarts, starts as without the pool and leaves the spares.
func TestSparePoolFits(t *testing.T) {
	pl := newPoolLab(t, 2)
	spares := local.PoolSpares(pl.pool)
	blocked := pl.sandbox(t, local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}})
	if local.InitPID(blocked) != spares[0].PID {
		t.Errorf("a NetworkBlockAll sandbox did not take the spare")
	}
	if local.NetworkLink(blocked) != 0 || pl.uplinkLinks(t)[spares[0].Link] {
		t.Errorf("a NetworkBlockAll sandbox kept the spare's link agentbox%d", spares[0].Link)
	}
	if got := strings.TrimSpace(mustRun(t, blocked, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")); got != "lo" {
		t.Errorf("interfaces of a blocked pooled sandbox: %q, want lo only", got)
	}
	if got := runProbe(t, blocked, "tcp", addrPort(labPublic4, pl.lab.Port)); got != "ENETUNREACH" {
		t.Errorf("the internet from a blocked pooled sandbox: %s, want ENETUNREACH", got)
	}
	listed := pl.sandbox(t, local.Config{Network: netPolicy(t, false, "203.0.113.11/32", "")})
	if local.InitPID(listed) != spares[1].PID || local.NetworkLink(listed) != spares[1].Link {
		t.Errorf("a NetworkAllowList sandbox did not take the spare with its link")
	}
	for _, c := range []struct {
		to   netip.Addr
		want string
	}{{labPublic4b, "ok"}, {labPublic4, refusedTCP}} {
		if got := runProbe(t, listed, "tcp", addrPort(c.to, pl.lab.Port)); got != c.want {
			t.Errorf("%s from a pooled sandbox allowed 203.0.113.11 only: %s, want %s", c.to, got, c.want)
		}
	}
	must(t, pl.pool.Fill(context.Background()))
	spares = local.PoolSpares(pl.pool)
	host := pl.sandbox(t, local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}})
	if pid := local.InitPID(host); pid == spares[0].PID || pid == spares[1].PID {
		t.Errorf("a HostNetwork sandbox took a spare")
	}
	sb := pl.sandbox(t, local.Config{})
	if local.InitPID(sb) != spares[0].PID {
		t.Fatalf("the default sandbox did not take the spare")
	}
	must(t, sb.Stop(context.Background()))
	must(t, pl.pool.Fill(context.Background()))
	spares = local.PoolSpares(pl.pool)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pid := local.InitPID(sb); pid == spares[0].PID || pid == spares[1].PID {
		t.Errorf("a restarted sandbox took a spare: it keeps its own range")
	}
	if got := mustRun(t, sb, "echo again"); got != "again\n" {
		t.Errorf("after the restart: %q", got)
	}
}

// TestSparePoolDeadSpare: a spare killed while it waits is dropped; the
// sandbox starts without it.
func TestSparePoolDeadSpare(t *testing.T) {
	pl := newPoolLab(t, 1)
	spare := local.PoolSpares(pl.pool)[0]
	must(t, syscall.Kill(spare.PID, syscall.SIGKILL))
	if !poll(10*time.Second, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(spare.PID) + "/ns")
		return err != nil
	}) {
		t.Fatalf("spare %d survived SIGKILL", spare.PID)
	}
	sb := pl.sandbox(t, local.Config{})
	if local.InitPID(sb) == spare.PID {
		t.Fatalf("the sandbox took the dead spare")
	}
	if got := mustRun(t, sb, "echo fine"); got != "fine\n" {
		t.Errorf("a sandbox started after its spare died: %q", got)
	}
	if !poll(10*time.Second, func() bool { return !pl.uplinkLinks(t)[spare.Link] }) {
		t.Errorf("the dead spare's link agentbox%d is left in the uplink", spare.Link)
	}
}

// TestSparePoolClose: Close ends the spares and gives back their links,
// firewall tables and uid ranges; sandboxes that took spares keep running.
func TestSparePoolClose(t *testing.T) {
	pl := newPoolLab(t, 2)
	sb := pl.sandbox(t, local.Config{})
	must(t, pl.pool.Fill(context.Background()))
	spares := local.PoolSpares(pl.pool)
	must(t, pl.pool.Close())
	must(t, pl.pool.Close()) // idempotent
	for _, sp := range spares {
		if _, err := os.Stat("/proc/" + strconv.Itoa(sp.PID) + "/ns"); err == nil {
			t.Errorf("spare init %d runs after Close", sp.PID)
		}
		if pl.uplinkLinks(t)[sp.Link] {
			t.Errorf("spare link agentbox%d is left after Close", sp.Link)
		}
	}
	for key := range readIDPool(t, pl.stateDir) {
		if strings.HasPrefix(key, "spare:") {
			t.Errorf("id pool after Close still lists %s", key)
		}
	}
	tables := uplinkTables(t, pl.lab)
	for _, sp := range spares {
		if tables["agentbox-"+strconv.Itoa(sp.Link)] {
			t.Errorf("spare firewall table agentbox-%d is left after Close", sp.Link)
		}
	}
	if got := mustRun(t, sb, "echo still"); got != "still\n" {
		t.Errorf("a sandbox that took a spare, after Close: %q", got)
	}
	if err := pl.pool.Fill(context.Background()); err == nil {
		t.Errorf("Fill on a closed pool succeeded")
	}
}

// TestSparePoolBadInput: bad sizes and a pool of another state dir are
// refused before anything starts.
func TestSparePoolBadInput(t *testing.T) {
	testenv.NeedRoot(t, "needs root: a Pool does")
	for _, size := range []int{-1, local.MaxPoolSize + 1} {
		if _, err := local.NewPool(local.PoolOptions{StateDir: t.TempDir(), Size: size}); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("size %d: %v", size, err)
		}
	}
	if _, err := local.NewPool(local.PoolOptions{StateDir: t.TempDir(), HostIDBase: 12345}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("a bad HostIDBase: %v", err)
	}
	pool, err := local.NewPool(local.PoolOptions{StateDir: t.TempDir()})
	must(t, err)
	defer pool.Close()
	other := t.TempDir()
	_, err = local.New(local.Options{StateDir: other, Pool: pool})
	if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "Options.Pool serves the state dir") {
		t.Errorf("a pool of another state dir: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(other, "sandboxes")); len(ents) != 0 {
		t.Errorf("the refused sandbox left %d entries", len(ents))
	}
}

// uplinkTables returns the names of the nftables tables of the lab's
// uplink.
func uplinkTables(t *testing.T, lab *netLab) map[string]bool {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(lab.uplink.Fd())))
	must(t, err)
	ts, err := c.ListTables()
	must(t, err)
	out := map[string]bool{}
	for _, tb := range ts {
		out[tb.Name] = true
	}
	return out
}

// readIDPool returns the first host uid of each range of the id pool of
// stateDir, by key.
func readIDPool(t *testing.T, stateDir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "hostids.json"))
	must(t, err)
	var p struct {
		Ranges map[string]struct{ First int } `json:"ranges"`
	}
	must(t, json.Unmarshal(b, &p))
	out := map[string]int{}
	for k, r := range p.Ranges {
		out[k] = r.First
	}
	return out
}

// TestSparePoolDomainAllowList: a sandbox with a domain allow list takes a
// spare, loses its link and reaches the listed name through the egress
// proxy only.
func TestSparePoolDomainAllowList(t *testing.T) {
	testenv.Need(t, haveCurl(), "curl is not installed: the probes run it inside the sandbox")
	port := originServer(t)
	pl := newPoolLab(t, 1)
	spare := local.PoolSpares(pl.pool)[0]
	c := local.Config{Network: netPolicy(t, false, "", "allowed.test")}
	c.Volumes = probeConfig(c.Confinement).Volumes
	sb := openSandbox(t, local.Options{StateDir: pl.stateDir, Pool: pl.pool, Config: c})
	local.SetNetworkTestUplink(sb, pl.lab.UplinkPath, labResolver)
	local.SetEgressTestHooks(sb, testHosts, true)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if local.InitPID(sb) != spare.PID || local.NetworkLink(sb) != 0 {
		t.Errorf("a DomainAllowList sandbox: init %d link %d, want the spare's init %d and no link", local.InitPID(sb), local.NetworkLink(sb), spare.PID)
	}
	if code, out := curl(t, sb, "http://allowed.test:"+port+"/a"); code != 0 || out != "origin /a host=allowed.test:"+port {
		t.Errorf("the listed name through the proxy: exit %d %q", code, out)
	}
	if got := runProbe(t, sb, "tcp", addrPort(labPublic4, pl.lab.Port)); got != "ENETUNREACH" {
		t.Errorf("a direct connection with the domain list: %s, want ENETUNREACH", got)
	}
}
