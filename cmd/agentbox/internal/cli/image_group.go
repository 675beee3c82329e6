package cli

import "github.com/spf13/cobra"

// imageCommand is the `agentbox image` group. It holds build only until
// the image store's commands (pull, ls, rm, prune) join it.
func (a *app) imageCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "image",
		Short: "Build local images",
		Args:  noArgs,
		RunE:  groupRunE,
	}
	c.AddCommand(a.imageBuildCommand())
	return c
}
