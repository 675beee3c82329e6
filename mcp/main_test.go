//go:build linux

package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mcp"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
)

// stdioEnv, set to a state dir, makes the test binary an MCP server on
// its stdio over a sandbox of that state dir (see serveStdio).
const stdioEnv = "AGENTBOX_MCP_TEST_STDIO"

func TestMain(m *testing.M) {
	local.Init()
	if dir := os.Getenv(stdioEnv); dir != "" {
		os.Exit(serveStdio(dir))
	}
	goleak.VerifyTestMain(m)
}

// serveStdio serves the test server on stdin and stdout until stdin
// ends, then destroys its sandbox.
func serveStdio(stateDir string) int {
	srv, closeAll, err := newServer(stateDir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer closeAll()
	if err := srv.ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// forbidden is a word the test server's approval gate refuses in commands.
const forbidden = "forbidden-command"

// newServer returns the test server: tools over a local sandbox without
// network in stateDir, working in /tmp/w, with small output bounds, quick
// progress and a gate refusing commands that hold forbidden. closeAll
// closes the tools and destroys the sandbox.
func newServer(stateDir string, opts *mcp.Options) (srv *mcp.Server, closeAll func(), err error) {
	sb, err := local.New(local.Options{ID: "mcp", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err != nil {
		return nil, nil, err
	}
	destroy := func() { _ = sb.Destroy(context.Background()) }
	ws, err := workspace.New(workspace.Config{Sandbox: sb, WorkingDirectory: "/tmp/w"})
	if err != nil {
		destroy()
		return nil, nil, err
	}
	set, err := tools.New(tools.Config{
		Workspace:        ws,
		MaxOutputBytes:   4096,
		ProgressInterval: 50 * time.Millisecond,
		Approve: func(_ context.Context, a tools.Action) error {
			if strings.Contains(a.Command, forbidden) {
				return errors.New("the test's policy forbids " + forbidden)
			}
			return nil
		},
	})
	if err != nil {
		destroy()
		return nil, nil, err
	}
	closeAll = func() { set.Close(); destroy() }
	srv, err = mcp.NewServer(set, opts)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return srv, closeAll, nil
}

// removeAtEnd removes the sandboxes of stateDir when the test ends, in
// case a server process did not.
func removeAtEnd(t *testing.T, stateDir string) {
	t.Cleanup(func() {
		if err := localtest.Destroy(context.Background(), stateDir, "mcp"); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("removing the test sandbox: %v", err)
		}
	})
}
