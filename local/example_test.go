//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentbox-dev/agentbox/local"
)

func Example() {
	// In a real program, local.Init() is the first line of main.
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "agentbox-example-")
	defer os.RemoveAll(stateDir)

	sb, err := local.New(local.Options{ID: "example", StateDir: stateDir, Config: local.Config{NetworkBlockAll: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Destroy(ctx)

	// The first command starts the sandbox.
	r, err := sb.ExecuteCommand(ctx, "echo", []string{"hello from", "$(hostname)"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(r.Stdout)
	r, _ = sb.ExecuteCommand(ctx, "echo $(hostname) $HOME $$", nil, nil)
	fmt.Print(r.Stdout[:len("example /home/agent")], "\n")
	// Output:
	// hello from $(hostname)
	// example /home/agent
}
