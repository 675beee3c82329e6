//go:build linux

package langchaingo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/contrib/langchaingo"
	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
)

func TestMain(m *testing.M) { localtest.Main(m) }

func TestTools(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.New(workspace.Config{Sandbox: localtest.NewSandbox(t, "lc"), WorkingDirectory: "/tmp/p"})
	if err != nil {
		t.Fatal(err)
	}
	set, err := tools.New(tools.Config{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	byName := map[string]*langchaingo.Tool{}
	for _, lt := range langchaingo.Tools(set, nil) {
		byName[lt.Name()] = lt.(*langchaingo.Tool)
		// Every definition's parameters are the tool's JSON schema.
		def := lt.(*langchaingo.Tool).Definition()
		if def.Type != "function" || def.Function.Name != lt.Name() || !json.Valid(def.Function.Parameters.(json.RawMessage)) {
			t.Errorf("definition of %s: %+v", lt.Name(), def)
		}
	}
	if len(byName) != len(set.Tools()) {
		t.Fatalf("%d tools, want %d", len(byName), len(set.Tools()))
	}
	if d := byName[tools.NameExecute].Description(); !strings.Contains(d, "plain text for command") || !strings.Contains(d, `"required":["command"]`) {
		t.Errorf("description: %s", d)
	}
	for _, c := range []struct{ tool, input, want string }{
		{tools.NameExecute, "echo plain", "plain\n"},
		{tools.NameExecute, "```json\n{\"command\": \"echo fenced\"}\n```", "fenced\n"},
		{tools.NameWriteFile, `{"path": "a.txt", "content": "x"}`, "Wrote 1 bytes to /tmp/p/a.txt."},
		{tools.NameReadFile, "a.txt", "x\n[/tmp/p/a.txt: lines 1-1 of 1]"},
		{tools.NameWriteFile, "a.txt", "Error: the arguments of write_file are not JSON"},
		{tools.NameProcessList, "", "No background processes."},
	} {
		got, err := byName[c.tool].Call(ctx, c.input)
		if err != nil || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s(%q) = %q, %v; want %q…", c.tool, c.input, got, err, c.want)
		}
	}
}
