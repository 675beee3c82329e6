//go:build linux

package local_test

import (
	"context"
	"fmt"
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
// refused" otherwise, and the DNS answer of public.test.
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
echo "dns $(getent hosts public.test | cut -d' ' -f1)"
`

// rootlessNetHelper is the helper mode "rootless-net": as an ordinary
// uid, in the lab's uplink (its "host"), it starts a sandbox with the
// default network, runs rootlessProbeScript and destroys the sandbox.
func rootlessNetHelper(ctx context.Context) int {
	sb, err := local.New(local.Options{ID: "rootless", StateDir: os.Getenv("HELPER_STATE_DIR")})
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
	must(t, os.Chown(stateDir, 2001, 2001))
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{helperEnv + "=rootless-net", "HELPER_STATE_DIR=" + stateDir, "HOME=/nonexistent", "PATH=/usr/bin:/bin",
		"HELPER_RESOLVER=" + labResolver.String(), "HELPER_PORT=" + strconv.Itoa(lab.Port)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 2001, Gid: 2001, Groups: []uint32{}}}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, testenv.StartUnprivileged(t, lab.uplink, cmd))
	err := cmd.Wait()
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
	for _, k := range []string{"loopback", "host", "neighbour", "gateway", "p10", "p172", "p192", "cgnat", "metadata", "sandboxlink"} {
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
	if !strings.Contains(got["note"], "ICMP") {
		t.Errorf("Info's note %q does not say ICMP is not relayed", got["note"])
	}
}

