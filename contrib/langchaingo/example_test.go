//go:build linux

package langchaingo_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/llms/fake"
	"github.com/tmc/langchaingo/schema"

	"github.com/agentbox-dev/agentbox/contrib/langchaingo"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/tools"
	"github.com/agentbox-dev/agentbox/workspace"
)

// A langchaingo agent works in a local sandbox. Its model is scripted
// (no network): it writes a file, runs a command on it, and answers.
func Example() {
	// In a real program, local.Init() is the first line of main.
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "agentbox-langchaingo-")
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

	model := fake.NewFakeLLM([]string{
		"Thought: I write the greeting.\nAction: write_file\nAction Input: {\"path\": \"greeting.txt\", \"content\": \"hello from the sandbox\\n\"}",
		"Thought: Now I shout it.\nAction: execute_command\nAction Input: tr a-z A-Z < greeting.txt",
		"Thought: I know the answer.\nFinal Answer: HELLO FROM THE SANDBOX",
	})
	agent := agents.NewOneShotAgent(model, langchaingo.Tools(set, nil))
	executor := agents.NewExecutor(agent, agents.WithReturnIntermediateSteps())
	out, err := executor.Call(ctx, map[string]any{"input": "Write a greeting to a file and shout it."})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, step := range out["intermediateSteps"].([]schema.AgentStep) {
		fmt.Printf("%s: %s\n", step.Action.Tool, strings.TrimSpace(step.Observation))
	}
	fmt.Println("answer:", out["output"])
	// Output:
	// write_file: Wrote 23 bytes to /tmp/project/greeting.txt.
	// execute_command: HELLO FROM THE SANDBOX
	// answer: HELLO FROM THE SANDBOX
}
