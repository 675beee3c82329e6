//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func Example() {
	// In a real program, local.Init() is the first line of main.
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "agentbox-example-")
	defer os.RemoveAll(stateDir)

	sb, err := local.New(local.Options{ID: "example", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
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

// A Pool keeps inits started ahead of time: a program that creates many
// sandboxes (a server, an agent running one task per sandbox) creates
// each in about half the time. It needs root.
func ExamplePool() {
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "agentbox-example-")
	defer os.RemoveAll(stateDir)

	pool, err := local.NewPool(local.PoolOptions{StateDir: stateDir, Size: 2})
	if err != nil {
		fmt.Println(err) // e.g. not root
		return
	}
	defer pool.Close()
	// Optional: without it the first sandbox starts as without a pool,
	// and the pool fills after it.
	if err := pool.Fill(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for _, task := range []string{"task-1", "task-2", "task-3"} {
		sb, err := local.New(local.Options{ID: task, StateDir: stateDir, Pool: pool})
		if err != nil {
			fmt.Println(err)
			return
		}
		r, err := sb.ExecuteCommand(ctx, "echo", []string{"done:", task}, nil)
		if err == nil {
			fmt.Print(r.Stdout)
		}
		_ = sb.Destroy(ctx)
	}
}

// Open returns the handle of an existing sandbox by id, as another process
// (a CLI, a server) finds it: every operation on that sandbox is a method
// of the handle. Open starts nothing.
func ExampleOpen() {
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "agentbox-example-")
	defer os.RemoveAll(stateDir)

	sb, err := local.New(local.Options{ID: "worker", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := sb.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_ = sb.Close(ctx) // the sandbox keeps running

	// Later, or in another process: find it by id.
	h, err := local.Open(ctx, stateDir, "worker")
	if err != nil {
		fmt.Println(err)
		return
	}
	info, _ := h.Info(ctx)
	fmt.Println(info.ID, info.Status, info.Network.Mode)
	if err := h.Stop(ctx); err != nil { // its processes end, its files stay
		fmt.Println(err)
		return
	}
	h, _ = local.Open(ctx, stateDir, "worker")
	fmt.Println(h.Status())
	if err := h.Destroy(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = local.Open(ctx, stateDir, "worker")
	fmt.Println(errors.Is(err, sandbox.ErrNotFound))
	// Output:
	// worker running blocked
	// stopped
	// true
}
