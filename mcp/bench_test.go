//go:build linux

package mcp_test

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mcp"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
)

// benchServer returns an MCP server over a started local sandbox and the
// sandbox, destroyed when b ends.
func benchServer(b *testing.B) (*mcp.Server, *local.Sandbox) {
	sb := localtest.NewSandbox(b, "bench")
	ws, err := workspace.New(workspace.Config{Sandbox: sb})
	if err != nil {
		b.Fatal(err)
	}
	set, err := tools.New(tools.Config{Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { set.Close() })
	srv, err := mcp.NewServer(set, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sb.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return srv, sb
}

// benchAgainstDirect runs, per iteration, a direct ExecuteCommand of
// true and an MCP tools/call of execute_command true, and reports both,
// their ratio and the overhead in ms.
func benchAgainstDirect(b *testing.B, sb *local.Sandbox, cs *sdk.ClientSession) {
	ctx := context.Background()
	call := func() {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tools.NameExecute, Arguments: map[string]any{"command": "true"}})
		if err != nil || res.IsError {
			b.Fatalf("tools/call: %+v, %v", res, err)
		}
	}
	call() // warm-up: sessions, connections
	if _, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil {
		b.Fatal(err)
	}
	var direct, viaMCP time.Duration
	for b.Loop() {
		t0 := time.Now()
		if r, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil || r.ExitCode != 0 {
			b.Fatalf("direct: %+v, %v", r, err)
		}
		t1 := time.Now()
		call()
		direct += t1.Sub(t0)
		viaMCP += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Nanoseconds())/n, "direct-ns/op")
	b.ReportMetric(float64(viaMCP.Nanoseconds())/n, "mcp-ns/op")
	b.ReportMetric(float64(viaMCP)/float64(direct), "ratio")
	b.ReportMetric(float64((viaMCP-direct).Microseconds())/1000/n, "overhead-ms")
}

// BenchmarkToolCallTrueStdio: an MCP client and the server joined by
// pipes, with the stdio transport's newline-delimited JSON.
func BenchmarkToolCallTrueStdio(b *testing.B) {
	srv, sb := benchServer(b)
	ctx, cancel := context.WithCancel(context.Background())
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(ctx, c2sR, s2cW) }()
	client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	benchAgainstDirect(b, sb, cs)
	cs.Close()
	cancel()
	c2sW.Close()
	s2cW.Close()
	<-done
}

// BenchmarkToolCallTrueHTTP: streamable HTTP on loopback.
func BenchmarkToolCallTrueHTTP(b *testing.B) {
	srv, sb := benchServer(b)
	hs := httptest.NewServer(srv.Handler(nil))
	defer hs.Close()
	client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	benchAgainstDirect(b, sb, cs)
}
