package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// ServerKeys manages the API keys that `agentbox serve` keeps in its
// records in a state dir (`agentbox serve keys`).
type ServerKeys interface {
	// CreateKey creates a key of organization org named name (defaults
	// when empty) and returns it with the key itself, which is never
	// shown again.
	CreateKey(ctx context.Context, stateDir, name, org string) (ServerKey, string, error)
	// Keys lists the keys, never the keys themselves.
	Keys(ctx context.Context, stateDir string) ([]ServerKey, error)
	// RemoveKey removes the key with id or name idOrName; an error
	// matching sandbox.ErrNotFound says there is none.
	RemoveKey(ctx context.Context, stateDir, idOrName string) error
}

// ServerKey describes an API key of serve's records.
type ServerKey struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	OrganizationID string    `json:"organizationId"`
	CreatedAt      time.Time `json:"createdAt"`
}

// serveKeysCommand is `agentbox serve keys`.
func (a *app) serveKeysCommand() *cobra.Command {
	var name, org string
	create := &cobra.Command{
		Use:   "create [--name NAME] [--org ORGANIZATION]",
		Short: "Create an API key and print it (once: only its hash is kept)",
		Long: `Create an API key of an organization (agentbox, the one --api-key keys and
key-less serves use, unless --org says another) and print it: only its hash is
kept, so it cannot be shown again. A key sees its organization's sandboxes and
volumes only. A serve running on the state dir accepts it from its next request
on, as it refuses a key removed with 'agentbox serve keys rm'.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sk, err := a.serverKeys()
			if err != nil {
				return err
			}
			k, key, err := sk.CreateKey(cmd.Context(), a.stateDir, name, org)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(cmd.OutOrStdout(), struct {
					ServerKey
					Key string `json:"key"`
				}{k, key})
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "API key %s (%s) of organization %s; it is shown only now:\n", k.Name, k.ID, k.OrganizationID)
			_, err = fmt.Fprintln(cmd.OutOrStdout(), key)
			return err
		},
	}
	create.Flags().StringVar(&name, "name", "", "the key's `NAME` (unique; default: from its id)")
	create.Flags().StringVar(&org, "org", "", "the `ORGANIZATION` whose sandboxes the key reaches (default: agentbox)")
	c := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and remove the API keys of agentbox serve",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	c.AddCommand(create,
		lsCommand("List the API keys (ids, names, organizations; never the keys)", a.serveKeysList),
		&cobra.Command{
			Use:     "rm ID|NAME...",
			Aliases: []string{"remove"},
			Short:   "Remove API keys",
			Args:    minArgs(1, "at least one key id or name (see 'agentbox serve keys ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				sk, err := a.serverKeys()
				if err != nil {
					return err
				}
				for _, k := range args {
					if err := sk.RemoveKey(cmd.Context(), a.stateDir, k); err != nil {
						return err
					}
				}
				return nil
			},
		},
	)
	return c
}

func (a *app) serveKeysList(ctx context.Context, w io.Writer) error {
	sk, err := a.serverKeys()
	if err != nil {
		return err
	}
	keys, err := sk.Keys(ctx, a.stateDir)
	if err != nil {
		return err
	}
	if a.json {
		if keys == nil {
			keys = []ServerKey{}
		}
		return writeJSON(w, keys)
	}
	t := newTable(w, "ID", "NAME", "ORGANIZATION", "CREATED")
	now := time.Now()
	for _, k := range keys {
		t.row(k.ID, k.Name, k.OrganizationID, stamp(now, k.CreatedAt))
	}
	return t.flush()
}

// serverKeys returns the configured ServerKeys, or the error saying the
// build has none.
func (a *app) serverKeys() (ServerKeys, error) {
	if a.cfg.ServerKeys == nil {
		return nil, errors.New("this build of agentbox has no server")
	}
	return a.cfg.ServerKeys, nil
}
