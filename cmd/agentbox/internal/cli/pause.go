package cli

import (
	"cmp"
	"context"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

// pauseCommands returns `sandbox pause` and `sandbox resume`: they go
// through the sandbox's Handle, which must implement sandbox.Pauser.
func (a *app) pauseCommands() []*cobra.Command {
	return []*cobra.Command{
		{
			Use:   "pause ID...",
			Short: "Pause sandboxes: freeze their processes, keeping their memory; the next command or start resumes them",
			Args:  minArgs(1, "at least one sandbox id (see 'agentbox sandbox ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.sandboxEach(cmd.Context(), cmd.OutOrStdout(), args, "paused", a.onPauser(sandbox.Pauser.Pause))
			},
		},
		{
			Use:   "resume ID...",
			Short: "Resume paused sandboxes: their processes go on where they were",
			Args:  minArgs(1, "at least one sandbox id (see 'agentbox sandbox ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.sandboxEach(cmd.Context(), cmd.OutOrStdout(), args, "resumed", a.onPauser(sandbox.Pauser.Resume))
			},
		},
	}
}

// onPauser returns act as an act of sandboxEach on the handle of the
// sandbox, which fails with a usage error when the engine's handles
// cannot pause.
func (a *app) onPauser(act func(p sandbox.Pauser, ctx context.Context) error) func(ctx context.Context, stateDir, id string) error {
	return a.onHandle(func(h Handle, ctx context.Context) error {
		p, ok := h.(sandbox.Pauser)
		if !ok {
			name := cmp.Or(a.engineName, a.cfg.Getenv(EngineEnv), DefaultEngineName)
			return usagef("engine %s cannot pause or resume sandboxes", name)
		}
		return act(p, ctx)
	})
}
