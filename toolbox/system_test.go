package toolbox_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestClientPorts(t *testing.T) {
	c, _ := daemonEnv(t, plain, toolbox.ClientOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx := context.Background()
	ports, err := c.ListeningPorts(ctx)
	if err != nil || !slices.Contains(ports, port) {
		t.Errorf("ListeningPorts = %v, %v; want %d among them", ports, err, port)
	}
	if used, err := c.IsPortInUse(ctx, port); err != nil || !used {
		t.Errorf("IsPortInUse(%d) = %v, %v", port, used, err)
	}
	if _, err := c.IsPortInUse(ctx, 0); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("IsPortInUse(0): %v", err)
	}
}

func TestClientSystemMetrics(t *testing.T) {
	c, _ := daemonEnv(t, plain, toolbox.ClientOptions{})
	m, err := c.SystemMetrics(context.Background())
	if err != nil || m.CPUCount < 1 || m.MemTotal <= 0 || m.DiskTotal <= 0 || m.Timestamp == "" {
		t.Errorf("SystemMetrics = %+v, %v", m, err)
	}
}

func TestClientUpdateEnv(t *testing.T) {
	c, _ := daemonEnv(t, plain, toolbox.ClientOptions{})
	ctx := context.Background()
	if err := c.UpdateEnv(ctx, toolbox.UpdateEnvRequest{Set: map[string]string{"AGENTBOX_TEST_VAR": "v1"}}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Execute(ctx, toolbox.ExecuteRequest{Command: "echo $AGENTBOX_TEST_VAR"})
	if err != nil || r.Result != "v1\n" {
		t.Errorf("after UpdateEnv: %+v, %v", r, err)
	}
	if err := c.UpdateEnv(ctx, toolbox.UpdateEnvRequest{}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("empty UpdateEnv: %v", err)
	}
}
