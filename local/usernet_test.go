//go:build linux

package local_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// rootlessProbeScript prints one line per probe of the rootless network:
// "NAME ok LINE" when a TCP connection got the lab's greeting, "NAME
// refused" otherwise; "NAME ok" or "NAME refused" for a DNS query over
// UDP answered or not (the user-mode network's resolver, and the lab's
// resolver, a private address, asked directly); and the DNS answer of
// public.test.
const rootlessProbeScript = `probe() { if l=$(timeout 5 bash -c "exec 3<>/dev/tcp/$2/$PORT && head -1 <&3" 2>/dev/null); then echo "$1 ok $l"; else echo "$1 refused"; fi; }
probe public 203.0.113.10
probe loopback 127.0.0.1
probe host 198.51.100.1
probe neighbour 198.51.100.2
probe gateway 10.0.2.2
probe p10 10.1.2.3
probe p172 172.16.1.2
probe p192 192.168.1.2
probe cgnat 100.64.1.2
probe metadata 169.254.169.254
probe sandboxlink 10.231.0.2
udp() { if timeout 3 bash -c "exec 3<>/dev/udp/$2/53 && printf '\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x06public\\x04test\\x00\\x00\\x01\\x00\\x01' >&3 && head -c 12 <&3 >/dev/null" 2>/dev/null; then echo "$1 ok"; else echo "$1 refused"; fi; }
udp udpresolver 10.0.2.3
udp udpprivate 10.53.0.53
echo "dns $(getent hosts public.test | cut -d' ' -f1)"
`

// rootlessNetHelper is the helper mode "rootless-net": as an ordinary
// uid, in the lab's uplink (its "host"), it starts a sandbox with the
// default network, runs rootlessProbeScript and destroys the sandbox.
func rootlessNetHelper(ctx context.Context) int {
	// An abstract unix socket of the sandbox's host, this process's
	// network namespace (the test listens on one in its own, HELPER_ABSTRACT).
	userAbstract := fmt.Sprintf("agentbox-rootless-user-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+userAbstract)
	if err != nil {
		fmt.Println("error: listen:", err)
		return 1
	}
	defer ln.Close()
	if err := connectAbstract(userAbstract); err != nil {
		fmt.Println("error: the user's abstract socket:", err)
		return 1
	}
	sb, err := local.New(local.Options{ID: "rootless", StateDir: os.Getenv("HELPER_STATE_DIR"), Config: probeConfig(local.Confinement{})})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	local.SetNetworkTestUplink(sb, "", netip.MustParseAddr(os.Getenv("HELPER_RESOLVER")))
	if _, err := sb.Start(ctx); err != nil {
		fmt.Println("error: start:", err)
		return 1
	}
	defer sb.Destroy(ctx)
	r, err := sb.ExecuteCommand(ctx, rootlessProbeScript, nil, &sandbox.ExecOptions{Env: map[string]string{"PORT": os.Getenv("HELPER_PORT")}})
	if err != nil {
		fmt.Println("error: command:", err)
		return 1
	}
	fmt.Print(r.Stdout)
	for _, p := range [][]string{{"abstracthost", "abstract_connect", os.Getenv("HELPER_ABSTRACT")}, {"abstractuser", "abstract_connect", userAbstract}, {"abstractown", "abstract_own"}} {
		r, err := sb.ExecuteCommand(ctx, probeCommand(p[1], p[2:]...), nil, nil)
		if err != nil {
			fmt.Println("error: probe:", err)
			return 1
		}
		fmt.Println(p[0], strings.TrimSpace(r.Stdout))
	}
	// The policy log is written at most every 100ms.
	var info *sandbox.Info
	for range 50 {
		if info, err = sb.Info(ctx); err != nil {
			fmt.Println("error: info:", err)
			return 1
		}
		if info.Network.RefusedConnections >= 10 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("refused %d\nnote %s\n", info.Network.RefusedConnections, info.Network.Note)
	// The user-mode network's mode is the one it started with.
	err = sb.UpdateNetworkSettings(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked})
	fmt.Printf("liveswitch %v\n", err)
	pid := local.UserNetPID(sb)
	if err := sb.Destroy(ctx); err != nil {
		fmt.Println("error: destroy:", err)
		return 1
	}
	// Ended: gone, or a zombie of this process (the tests' subreaper).
	if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); pid == 0 || err == nil && !strings.Contains(string(st), ") Z ") {
		fmt.Println("error: the user-mode network's process", pid, "outlived Destroy")
		return 1
	}
	return 0
}

// TestRootlessNetwork runs a sandbox with the default network as uid 2001
// (no root), in the network lab's uplink, which plays its host: the public
// address is reached through the user-mode network, and the host's
// loopback and own addresses, private, shared and link-local ranges and
// the sandboxes' links are refused; DNS works; Info counts the refusals;
// Destroy leaves no process.
func TestRootlessNetwork(t *testing.T) {
	lab := newNetLab(t)
	stateDir := newSharedStateDir(t, "agentbox-rootless-net-")
	installProbes(t, stateDir)
	must(t, filepath.WalkDir(stateDir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 2001, 2001)
	}))
	// The host's abstract socket, in the test's network namespace.
	hostAbstract := fmt.Sprintf("agentbox-rootless-host-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+hostAbstract)
	must(t, err)
	defer ln.Close()
	// Controls: from the sandbox's host (the uplink), every address the
	// sandbox is refused and the lab has answers, so a refusal is the
	// policy's.
	for _, a := range []string{"127.0.0.1", "198.51.100.1", "198.51.100.2", "10.1.2.3", "172.16.1.2", "192.168.1.2", "100.64.1.2", "169.254.169.254"} {
		if _, err := lab.dial(net.JoinHostPort(a, strconv.Itoa(lab.Port))); err != nil {
			t.Fatalf("control: the uplink does not reach %s: %v", a, err)
		}
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{helperEnv + "=rootless-net", "HELPER_STATE_DIR=" + stateDir, "HOME=/nonexistent", "PATH=/usr/bin:/bin",
		"HELPER_RESOLVER=" + labResolver.String(), "HELPER_PORT=" + strconv.Itoa(lab.Port), "HELPER_ABSTRACT=" + hostAbstract}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 2001, Gid: 2001, Groups: []uint32{}}}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, testenv.StartUnprivileged(t, lab.uplink, cmd))
	err = cmd.Wait()
	t.Logf("as uid 2001:\n%s", out.String())
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	if want := "ok hello from 203.0.113.10"; got["public"] != want {
		t.Errorf("public address: %q, want %q", got["public"], want)
	}
	if got["udpresolver"] != "ok" {
		t.Errorf("DNS over UDP to the user-mode network's resolver: %q, want ok", got["udpresolver"])
	}
	if got["abstractown"] != "ok" {
		t.Errorf("an abstract socket of the sandbox's own: %q, want ok", got["abstractown"])
	}
	for _, k := range []string{"abstracthost", "abstractuser"} {
		if got[k] != "ECONNREFUSED" {
			t.Errorf("%s: %q, want ECONNREFUSED (the sandbox has its own network namespace)", k, got[k])
		}
	}
	for _, k := range []string{"loopback", "host", "neighbour", "gateway", "p10", "p172", "p192", "cgnat", "metadata", "sandboxlink", "udpprivate"} {
		if got[k] != "refused" {
			t.Errorf("%s: %q, want refused", k, got[k])
		}
	}
	if got["dns"] != labPublic4.String() {
		t.Errorf("DNS of public.test: %q, want %s", got["dns"], labPublic4)
	}
	if n, _ := strconv.Atoi(got["refused"]); n < 10 {
		t.Errorf("Info counts %d refused connections, want at least 10", n)
	}
	if !strings.Contains(got["liveswitch"], "stop the sandbox") {
		t.Errorf("switching a running rootless sandbox to the blocked mode: %q, want an error saying to stop it first", got["liveswitch"])
	}
	if !strings.Contains(got["note"], "ICMP") {
		t.Errorf("Info's note %q does not say ICMP is not relayed", got["note"])
	}
}
