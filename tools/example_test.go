//go:build linux

package tools_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
)

func Example() {
	// In a real program, local.Init() is the first line of main.
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "agentbox-tools-")
	defer os.RemoveAll(stateDir)
	sb, err := local.New(local.Options{ID: "agent", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy(ctx)
	ws, _ := workspace.New(workspace.Config{Sandbox: sb, WorkingDirectory: "/tmp/project"})
	set, _ := tools.New(tools.Config{Workspace: ws})
	defer set.Close()

	// A model's tool call: a name and JSON arguments.
	r := set.Call(ctx, "execute_command", []byte(`{"command": "echo hi > note.txt; cat note.txt; exit 3"}`), nil)
	fmt.Printf("%q\n", r.Text)
	// A bad call is a result the model reads, not a failure of the loop.
	r = set.Call(ctx, "edit_file", []byte(`{"path": "note.txt", "old_string": "bye", "new_string": "hello"}`), nil)
	fmt.Println(r.IsError())
	// Output:
	// "hi\n\nExit code: 3"
	// true
}
