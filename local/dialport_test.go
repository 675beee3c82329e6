//go:build linux

package local_test

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestDialPort: DialPort reaches a server on the sandbox's interface from
// inside its namespace, publishes nothing on the host, and never reaches
// the sandbox's loopback (where a domain list's egress proxy listens).
func TestDialPort(t *testing.T) {
	lab := newNetLab(t)
	sb := lab.sandbox(t, local.Config{})
	ctx := context.Background()
	spawnProbe(t, sb, "listening", "listen", "0.0.0.0:8080")
	spawnProbe(t, sb, "listening", "listen", "127.0.0.1:8081")
	_, own := linkAddrs(t, sb)

	c, err := sb.DialPort(ctx, 8080)
	must(t, err)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil || line != "hello from "+own.String()+"\n" {
		t.Fatalf("DialPort 8080: %q %v, want the greeting of the sandbox's interface", line, err)
	}
	if c, err := sb.DialPort(ctx, 8081); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Errorf("DialPort to a server on the sandbox's loopback only: %v, want ECONNREFUSED", err)
	}
	info, err := sb.Info(ctx)
	must(t, err)
	if len(info.Network.Ports) != 0 {
		t.Errorf("ports published after DialPort: %+v, want none", info.Network.Ports)
	}

	for _, bad := range []int{0, -1, 70000} {
		if _, err := sb.DialPort(ctx, bad); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("DialPort port %d: %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := local.Open(ctx, sb.StateDir(), "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("DialPort to a sandbox that does not exist: %v, want ErrNotFound", err)
	}
	blocked := lab.sandbox(t, local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}})
	if _, err := blocked.DialPort(ctx, 8080); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "loopback only") {
		t.Errorf("DialPort to a blocked sandbox: %v, want ErrInvalidArgument (loopback only)", err)
	}
	must(t, sb.Stop(ctx))
	if _, err := sb.DialPort(ctx, 8080); !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "does not run") {
		t.Errorf("DialPort to a stopped sandbox: %v, want ErrInvalidArgument (does not run)", err)
	}
}
