//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
)

func TestMain(m *testing.M) { localtest.Main(m) }

// newSet returns tools over a fresh local sandbox without network, all
// removed when the test ends.
func newSet(t *testing.T, cfg tools.Config) *tools.Set {
	t.Helper()
	ws, err := workspace.New(workspace.Config{Sandbox: localtest.NewSandbox(t, "tools"), WorkingDirectory: "/tmp/w"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = ws
	set, err := tools.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

// call calls a tool with args marshalled to JSON.
func call(t *testing.T, s *tools.Set, name string, args any, opts *tools.CallOptions) *tools.Result {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return s.Call(context.Background(), name, b, opts)
}

// mustCall is call that fails the test on a tool error.
func mustCall(t *testing.T, s *tools.Set, name string, args any) *tools.Result {
	t.Helper()
	r := call(t, s, name, args, nil)
	if r.IsError() {
		t.Fatalf("%s %v: %s", name, args, r.Text)
	}
	return r
}
