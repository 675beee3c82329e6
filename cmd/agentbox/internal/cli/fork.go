package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// forkCommand is `agentbox sandbox fork ID [NAME]`.
func (a *app) forkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "fork ID [NAME]",
		Short: "Fork a sandbox: a new one with a copy of its files, configuration and network policy, running if it runs (it keeps running)",
		Long: "Fork a sandbox: a new one with a copy of its files, configuration and network policy, running if it runs " +
			"(it keeps running). NAME is the new sandbox's id and name; without it the engine chooses an id. " +
			"Prints the new sandbox's id.",
		Args: rangeArgs(1, 2, "a sandbox id (see 'agentbox sandbox ls') and, optionally, the fork's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := sandbox.ForkOptions{}
			if len(args) == 2 {
				opts.ID, opts.Name = args[1], args[1]
			}
			return a.sandboxFork(cmd.Context(), cmd.OutOrStdout(), args[0], opts)
		},
	}
}

// sandboxFork forks the sandbox id (sandbox.Forker) and prints the fork's
// id, or its Info under --json.
func (a *app) sandboxFork(ctx context.Context, w io.Writer, id string, opts sandbox.ForkOptions) error {
	return notFound(a.withHandle(ctx, id, func(h Handle) error {
		f, ok := h.(sandbox.Forker)
		if !ok {
			return fmt.Errorf("%w: the %s engine cannot fork sandboxes", sandbox.ErrUnsupported, a.engineLabel())
		}
		fork, err := f.Fork(ctx, opts)
		if err != nil {
			if errors.Is(err, sandbox.ErrNotFound) {
				return err
			}
			return fmt.Errorf("fork sandbox %s: %w", id, err)
		}
		if a.json {
			info, err := fork.Info(ctx)
			if err != nil {
				return err
			}
			return writeJSON(w, info)
		}
		_, err = fmt.Fprintln(w, fork.ID())
		return err
	}), id)
}

// engineLabel names the engine the commands drive, for messages.
func (a *app) engineLabel() string {
	for _, n := range []string{a.engineName, a.cfg.Getenv(EngineEnv)} {
		if n != "" {
			return n
		}
	}
	return DefaultEngineName
}

// rangeArgs requires from min to max positional arguments, named by what.
func rangeArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usagef("%s needs %s", cmd.CommandPath(), what)
		}
		return nil
	}
}
