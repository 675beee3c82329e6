package cli

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/agentbox-dev/agentbox/mcp"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
	"github.com/spf13/cobra"
)

// mcpOptions are the options of `agentbox mcp`.
type mcpOptions struct {
	open OpenOptions
	// httpAddr, when set, serves streamable HTTP there instead of stdio.
	httpAddr string
	// token is the bearer token HTTP clients must send ("" for none).
	token string
	// workDir is the workspace's working directory ("" for the sandbox's).
	workDir string
	// approve asks the user to approve commands and writes (elicitation).
	approve bool
}

func (a *app) mcpCommand() *cobra.Command {
	var (
		o         mcpOptions
		tokenFile string
	)
	c := &cobra.Command{
		Use:   "mcp [--id SANDBOX] [--http HOST:PORT [--token-file FILE]] [--approve]",
		Short: "Serve a sandbox's tools to MCP clients (agents, IDEs)",
		Long: `Serve a sandbox as an MCP server: tools to run commands (in the foreground
with progress, or in the background with polled output, stdin and kill) and
to read, write, edit, list, find and delete files, and the sandbox's files
as file:/// resources. The sandbox is created (or restarted) by the first
tool call and keeps running when the server ends.

By default the server speaks MCP on standard input and output, as MCP hosts
(desktop and IDE agents) start it. With --http it serves streamable HTTP
instead; on an address beyond loopback it needs a bearer token
(--token-file), which every request must carry as "Authorization: Bearer
TOKEN".

With --approve the user approves every command and every change to a file
through the client (an MCP elicitation); a client that cannot ask is
refused. Cancelling a tool call kills its command.

A host's configuration (e.g. a desktop agent's mcpServers):

  {"mcpServers": {"agentbox": {"command": "agentbox", "args": ["mcp", "--id", "agent"]}}}`,
		Example: `  agentbox mcp
  agentbox mcp --id project --workdir /home/agent/project --approve
  agentbox mcp --http 127.0.0.1:7777
  agentbox mcp --http 0.0.0.0:7777 --token-file ~/.config/agentbox/mcp-token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkID(o.open.ID); err != nil {
				return err
			}
			if tokenFile != "" {
				if o.httpAddr == "" {
					return usagef("--token-file is for --http: standard input and output need no token")
				}
				tok, err := readFirstLine("--token-file", tokenFile)
				if err != nil {
					return err
				}
				o.token = tok
			}
			if o.httpAddr != "" && o.token == "" && !loopbackAddr(o.httpAddr) {
				return usagef("refusing to serve %s without a token: anyone who reaches it could run commands in the sandbox; pass --token-file FILE, or listen on loopback (--http 127.0.0.1:PORT)", o.httpAddr)
			}
			o.open.StateDir = a.stateDir
			return a.runMCP(cmd.Context(), orEmpty(a.cfg.Stdin), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := c.Flags()
	addIDFlag(f, &o.open.ID)
	f.StringVar(&o.httpAddr, "http", "", "serve streamable HTTP on `HOST:PORT` instead of standard input and output")
	f.StringVar(&tokenFile, "token-file", "", "read the bearer token HTTP clients must send from `FILE` (its first line)")
	f.StringVar(&o.workDir, "workdir", "", "the absolute `DIR` relative paths and commands use, created if missing (default: the sandbox's working directory)")
	f.BoolVar(&o.approve, "approve", false, "ask the user (through the MCP client) to approve every command and change to a file")
	return c
}

// runMCP serves the tools of the sandbox o names, on in and out or on
// o.httpAddr, until the client leaves (stdio) or ctx ends. Messages go to
// errw: in stdio mode out carries the protocol only.
func (a *app) runMCP(ctx context.Context, in io.Reader, out, errw io.Writer, o mcpOptions) error {
	box, err := a.engine.Open(ctx, o.open)
	if err != nil {
		return fmt.Errorf("open sandbox %q: %w", o.open.ID, err)
	}
	// The sandbox and its background processes outlive the server.
	defer box.Detach(context.WithoutCancel(ctx))
	ws, err := workspace.New(workspace.Config{Sandbox: box, WorkingDirectory: o.workDir})
	if err != nil {
		return err
	}
	set, err := tools.New(tools.Config{Workspace: ws})
	if err != nil {
		return err
	}
	defer set.Close()
	srv, err := mcp.NewServer(set, &mcp.Options{AskApproval: o.approve})
	if err != nil {
		return err
	}
	if o.httpAddr == "" {
		return srv.ServeStdio(ctx, in, out)
	}
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.httpAddr, err)
	}
	fmt.Fprintf(errw, "agentbox mcp: sandbox %q at http://%s/ (streamable HTTP)\n", o.open.ID, ln.Addr())
	if o.token == "" {
		fmt.Fprintf(errw, "agentbox mcp: no token: any process of this machine may use it (loopback only)\n")
	}
	return srv.Serve(ctx, ln, &mcp.HTTPOptions{Token: o.token})
}
