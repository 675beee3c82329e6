//go:build linux

package mcp_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/tools"
)

// TestHugeFileBounded: issue 24 through MCP. edit_file and reading the
// file as a resource, on a 40 GiB sparse file, are refused with errors
// naming the limits, and the server (this process) allocates little.
func TestHugeFileBounded(t *testing.T) {
	hs := newHTTPServer(t, nil, "")
	cs := connectHTTP(t, hs, "", "", nil)
	mustTool(t, cs, tools.NameExecute, obj{"command": "printf 'needle\\n' > big && truncate -s 40G big"})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := callTool(t, cs, tools.NameEditFile, obj{"path": "big", "old_string": "needle", "new_string": "pin"})
	_, rerr := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "file:///tmp/w/big"})
	runtime.ReadMemStats(&after)

	if !res.IsError || !strings.Contains(text(res), "40 GiB") || !strings.Contains(text(res), "16 MiB") {
		t.Errorf("edit_file of a 40 GiB file: error %v: %s", res.IsError, text(res))
	}
	if rerr == nil || !strings.Contains(rerr.Error(), "40 GiB") || !strings.Contains(rerr.Error(), "read_file") {
		t.Errorf("reading a 40 GiB file as a resource: %v", rerr)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 16<<20 {
		t.Errorf("the server allocated %d bytes refusing a 40 GiB file", d)
	}
}
