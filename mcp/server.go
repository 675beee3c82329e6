package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/tools"
)

// Options configures a Server. The zero value is valid.
type Options struct {
	// Name and Version identify the server to clients ("agentbox" and
	// "dev" by default).
	Name, Version string
	// AskApproval asks the user, through an MCP elicitation, to approve
	// every command and every change to a file before it happens. A
	// client that does not support elicitation gets a refusal.
	AskApproval bool
	// Logger logs the SDK's activity; nil logs nothing.
	Logger *slog.Logger
}

// Server is an MCP server exposing the tools of one tools.Set.
type Server struct {
	set  *tools.Set
	opts Options
	srv  *sdk.Server
}

// NewServer returns a server of set's tools and of its workspace's files
// (as resources).
func NewServer(set *tools.Set, opts *Options) (*Server, error) {
	if set == nil {
		return nil, fmt.Errorf("mcp: the tool set is nil: %w", sandbox.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "agentbox"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{set: set, opts: o}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: o.Name, Version: o.Version}, &sdk.ServerOptions{
		Instructions: set.Workspace().Instructions(),
		Logger:       o.Logger,
	})
	for _, t := range set.Tools() {
		s.srv.AddTool(&sdk.Tool{
			Name:        t.Name,
			Title:       t.Title,
			Description: t.Description(),
			InputSchema: t.InputSchema,
			Annotations: annotations(t),
		}, s.handler(t))
	}
	s.addResources()
	return s, nil
}

func annotations(t *tools.Tool) *sdk.ToolAnnotations {
	a := &sdk.ToolAnnotations{Title: t.Title, ReadOnlyHint: t.ReadOnly}
	if !t.ReadOnly {
		d := t.Destructive
		a.DestructiveHint = &d
	}
	return a
}

// SDKServer returns the underlying go-sdk server, e.g. to add prompts or
// serve it over another transport.
func (s *Server) SDKServer() *sdk.Server { return s.srv }

// Run serves one client over t until the client disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.srv.Run(ctx, t)
}

// ServeStdio serves one client that writes requests to r and reads
// responses from w (an MCP host's stdio transport), until r ends or ctx
// does.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	err := s.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}})
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
