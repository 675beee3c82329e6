package toolbox

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// ListeningPorts returns the TCP ports listened on in the sandbox
// (GET /port). An agentbox server lists every port; Daytona's lists those
// from 3000 to 9999.
func (c *Client) ListeningPorts(ctx context.Context) ([]int, error) {
	var r PortList
	if err := c.doJSON(ctx, http.MethodGet, "/port", nil, nil, nil, &r); err != nil {
		return nil, err
	}
	return r.Ports, nil
}

// IsPortInUse reports whether a TCP socket listens on port in the sandbox
// (GET /port/{port}/in-use). Daytona's server answers only for ports
// 3000 to 9999.
func (c *Client) IsPortInUse(ctx context.Context, port int) (bool, error) {
	if port < 1 || port > 65535 {
		return false, fmt.Errorf("toolbox: port %d is not from 1 to 65535: %w", port, sandbox.ErrInvalidArgument)
	}
	var r IsPortInUseResponse
	if err := c.doJSON(ctx, http.MethodGet, "/port/"+strconv.Itoa(port)+"/in-use", nil, nil, nil, &r); err != nil {
		return false, err
	}
	return r.IsInUse, nil
}

// SystemMetrics returns the sandbox's CPU, memory and disk use and limits
// (GET /system/metrics).
func (c *Client) SystemMetrics(ctx context.Context) (*SystemMetrics, error) {
	var m SystemMetrics
	if err := c.doJSON(ctx, http.MethodGet, "/system/metrics", nil, nil, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// UpdateEnv changes the environment of the processes the server starts
// from now on (POST /env): one-shot executions and new sessions. Running
// processes and existing sessions keep theirs.
func (c *Client) UpdateEnv(ctx context.Context, req UpdateEnvRequest) error {
	if len(req.Set) == 0 && len(req.Unset) == 0 && req.UnsetValuePrefix == "" {
		return fmt.Errorf("toolbox: update env: nothing to change: %w", sandbox.ErrInvalidArgument)
	}
	return c.doJSON(ctx, http.MethodPost, "/env", nil, req, nil, nil)
}
