package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// KindExists is the error kind of a name already taken (a secret's; exit
// 1).
const KindExists = "exists"

// SecretEngine is an [Engine] with named secrets: values a sandbox's
// commands may send to some hosts but never read (exec --secret). The
// local engine keeps them in the state dir (local.SecretStore), the
// daytona engine on the control plane (its /secret API).
type SecretEngine interface {
	// CreateSecret makes a secret; a taken name is an error matching
	// fs.ErrExist, bad input one matching
	// sandbox.ErrInvalidArgument.
	CreateSecret(ctx context.Context, stateDir string, spec SecretSpec) (*SecretInfo, error)
	// Secrets describes every secret, without values.
	Secrets(ctx context.Context, stateDir string) ([]SecretInfo, error)
	// UpdateSecret changes a secret's value or hosts (nil: unchanged); an
	// unknown name matches sandbox.ErrNotFound.
	UpdateSecret(ctx context.Context, stateDir, name string, change SecretChange) (*SecretInfo, error)
	// RemoveSecret removes a secret; an unknown name matches
	// sandbox.ErrNotFound.
	RemoveSecret(ctx context.Context, stateDir, name string) error
}

// SecretSpec is a new secret. fmt prints it without its Value.
type SecretSpec struct {
	Name        string
	Value       string `json:"-"`
	Description string
	Hosts       []string
	AllowHTTP   bool
}

// Format prints s without its value.
func (s SecretSpec) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "SecretSpec{Name: %q, Hosts: %q, AllowHTTP: %t, Description: %q, Value: <redacted>}", s.Name, s.Hosts, s.AllowHTTP, s.Description)
}

// SecretChange changes a secret: nil fields keep theirs. fmt prints it
// without its Value.
type SecretChange struct {
	Value *string `json:"-"`
	Hosts []string
}

// Format prints c without its value.
func (c SecretChange) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "SecretChange{Hosts: %q, Value changed: %t}", c.Hosts, c.Value != nil)
}

// SecretInfo describes a secret, never its value.
type SecretInfo struct {
	Name string `json:"name"`
	// ID is the control plane's id (daytona); "" on the local engine.
	ID          string   `json:"id,omitempty"`
	Hosts       []string `json:"hosts"`
	AllowHTTP   bool     `json:"allowHTTP,omitempty"`
	Description string   `json:"description,omitempty"`
	// Placeholder is what sandboxes' environments hold for it, when the
	// engine has one placeholder per secret (daytona).
	Placeholder string    `json:"placeholder,omitempty"`
	Created     time.Time `json:"created,omitzero"`
	Updated     time.Time `json:"updated,omitzero"`
}

// secretValueHelp is what the secret commands' help says of the value.
const secretValueHelp = `The value is read from standard input, never from a flag or an argument,
which every user of the machine could read in the process list; one final
line break is dropped (echo "$KEY" | … works). On a terminal it is asked for,
without echo. An empty value is refused.`

func (a *app) secretCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "secret",
		Aliases: []string{"secrets"},
		Short:   "Create, list, update and remove secrets: values commands may send to some hosts but never read",
		Long: `Secrets are values a sandbox's commands may send to some hosts but never read.

'agentbox exec --secret NAME' gives a new sandbox the environment variable
NAME set to a placeholder; the engine's egress proxy replaces the
placeholder with the value in requests to the secret's hosts (over TLS
unless --allow-http), and nowhere else. The value never enters the sandbox.

` + secretValueHelp,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	c.AddCommand(a.secretCreateCommand(), lsCommand("List secrets (never their values)", a.secretList), a.secretUpdateCommand(), a.secretRmCommand())
	return c
}

func (a *app) secretCreateCommand() *cobra.Command {
	var spec SecretSpec
	c := &cobra.Command{
		Use:   "create NAME --host HOST [--host HOST...] [--allow-http] [--description TEXT] < VALUE",
		Short: "Create a secret, its value read from standard input",
		Long:  "Create the secret NAME, which may be sent to the hosts --host names.\n\n" + secretValueHelp,
		Example: `  printf %s "$OPENAI_API_KEY" | agentbox secret create OPENAI_API_KEY --host api.openai.com
  agentbox secret create GH_TOKEN --host api.github.com --host '*.githubusercontent.com' < token.txt
  agentbox exec --secret OPENAI_API_KEY -- curl -H "Authorization: Bearer $OPENAI_API_KEY" https://api.openai.com/v1/models`,
		Args: exactArgs(1, "a secret name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(spec.Hosts) == 0 {
				return usagef("secret create needs at least one --host HOST: the hosts the value may be sent to (api.example.com, *.example.com)")
			}
			se, err := a.secretEngine()
			if err != nil {
				return err
			}
			spec.Name = args[0]
			if spec.Value, err = readSecretValue(a.cfg.Stdin, cmd.ErrOrStderr(), spec.Name); err != nil {
				return err
			}
			info, err := se.CreateSecret(cmd.Context(), a.stateDir, spec)
			if err != nil {
				return secretError(err, spec.Name)
			}
			return a.printSecret(cmd.OutOrStdout(), "created", info)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&spec.Hosts, "host", nil, "a `HOST` the value may be sent to: a name (api.example.com) or a wildcard (*.example.com, the names below it); repeatable")
	f.BoolVar(&spec.AllowHTTP, "allow-http", false, "substitute the value in cleartext HTTP requests to the hosts too, not only over TLS (local engine)")
	f.StringVar(&spec.Description, "description", "", "a note on the secret (`TEXT`), shown by 'agentbox secret ls'")
	return c
}

func (a *app) secretUpdateCommand() *cobra.Command {
	var (
		hosts      []string
		valueStdin bool
	)
	c := &cobra.Command{
		Use:   "update NAME [--host HOST...] [--value-stdin]",
		Short: "Change a secret's hosts, or its value (read from standard input)",
		Long: "Change the hosts (--host, replacing them all) or the value (--value-stdin) of the secret NAME.\n" +
			"Sandboxes made before keep what they had.\n\n" + secretValueHelp,
		Args: exactArgs(1, "a secret name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(hosts) == 0 && !valueStdin {
				return usagef("secret update needs --host HOST (the new hosts) or --value-stdin (a new value on standard input), or both")
			}
			se, err := a.secretEngine()
			if err != nil {
				return err
			}
			var change SecretChange
			if len(hosts) > 0 {
				change.Hosts = hosts
			}
			if valueStdin {
				v, err := readSecretValue(a.cfg.Stdin, cmd.ErrOrStderr(), args[0])
				if err != nil {
					return err
				}
				change.Value = &v
			}
			info, err := se.UpdateSecret(cmd.Context(), a.stateDir, args[0], change)
			if err != nil {
				return secretError(err, args[0])
			}
			return a.printSecret(cmd.OutOrStdout(), "updated", info)
		},
	}
	c.Flags().StringArrayVar(&hosts, "host", nil, "the new `HOST`s, replacing the old (repeatable)")
	c.Flags().BoolVar(&valueStdin, "value-stdin", false, "read a new value from standard input")
	return c
}

func (a *app) secretRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"remove"},
		Short:   "Remove secrets (sandboxes made with them keep them)",
		Args:    minArgs(1, "at least one secret name (see 'agentbox secret ls')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			se, err := a.secretEngine()
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := se.RemoveSecret(cmd.Context(), a.stateDir, name); err != nil {
					return secretError(err, name)
				}
				if !a.json {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", name)
				}
			}
			return nil
		},
	}
}

// secretList prints the engine's secrets, as a table or JSON.
func (a *app) secretList(ctx context.Context, w io.Writer) error {
	se, err := a.secretEngine()
	if err != nil {
		return err
	}
	all, err := se.Secrets(ctx, a.stateDir)
	if err != nil {
		return fmt.Errorf("list secrets: %w", err)
	}
	if a.json {
		if all == nil {
			all = []SecretInfo{}
		}
		return writeJSON(w, all)
	}
	t := newTable(w, "NAME", "HOSTS", "HTTP", "UPDATED", "DESCRIPTION")
	for _, s := range all {
		http := "no"
		if s.AllowHTTP {
			http = "yes"
		}
		updated := ""
		if !s.Updated.IsZero() {
			updated = s.Updated.Local().Format(time.DateTime)
		}
		t.row(s.Name, strings.Join(s.Hosts, ","), http, updated, s.Description)
	}
	return t.flush()
}

// printSecret reports a secret created or updated.
func (a *app) printSecret(w io.Writer, what string, info *SecretInfo) error {
	if a.json {
		return writeJSON(w, info)
	}
	_, err := fmt.Fprintf(w, "%s secret %s (hosts: %s)\n", what, info.Name, strings.Join(info.Hosts, ", "))
	return err
}

// secretEngine returns the engine's secrets, or why it has none.
func (a *app) secretEngine() (SecretEngine, error) {
	se, ok := a.engine.(SecretEngine)
	if !ok {
		return nil, fmt.Errorf("%w: this engine has no secrets", sandbox.ErrUnsupported)
	}
	return se, nil
}

// secretError explains the error of a secret command on name.
func secretError(err error, name string) error {
	switch {
	case errors.Is(err, fs.ErrExist):
		return withKind(KindExists, 0, fmt.Errorf("secret %q exists already: 'agentbox secret update %s' changes it, 'agentbox secret rm %s' removes it", name, name, name))
	case errors.Is(err, sandbox.ErrNotFound):
		return notFoundf("no secret %q (see 'agentbox secret ls')", name)
	}
	return err
}

// readSecretValue reads the value of the secret name from stdin: asked
// for without echo on a terminal (the prompt on prompt), else read to its
// end, one final line break dropped. Empty is refused.
func readSecretValue(stdin io.Reader, prompt io.Writer, name string) (string, error) {
	var data []byte
	var err error
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(prompt, "Value of secret %s (not echoed): ", name)
		data, err = term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
	} else {
		data, err = io.ReadAll(io.LimitReader(orEmpty(stdin), sandbox.MaxSecretValue+3))
	}
	if err != nil {
		return "", fmt.Errorf("read the value of secret %s from standard input: %w", name, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	switch {
	case v == "":
		return "", usagef("the value of secret %s is empty: give it on standard input, as in printf %%s \"$VALUE\" | agentbox secret create %s --host HOST (never as a flag: the process list shows flags)", name, name)
	case len(v) > sandbox.MaxSecretValue:
		return "", usagef("the value of secret %s on standard input is larger than %d KiB, the most a secret holds", name, sandbox.MaxSecretValue>>10)
	}
	return v, nil
}

// secretRefName is what a secret's name may look like on either engine.
var secretRefName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)

// secretFlags is exec's --secret: NAME (the variable NAME gets the
// secret NAME) or ENV=NAME, repeatable, into env → secret name.
type secretFlags struct{ refs map[string]string }

func (s *secretFlags) add(fs *pflag.FlagSet) {
	fs.Var(s, "secret", "create the sandbox with the secret `NAME` (see 'agentbox secret ls') as the variable NAME, or ENV=NAME as the variable ENV; "+
		"the variable holds a placeholder, which the value replaces only in requests to the secret's hosts (repeatable)")
}

func (s *secretFlags) String() string { return "" }

func (s *secretFlags) Type() string { return "NAME|ENV=NAME" }

func (s *secretFlags) Set(v string) error {
	env, name, ok := strings.Cut(v, "=")
	if !ok {
		name = env
	}
	switch {
	case !sandbox.ValidEnvName(env):
		return fmt.Errorf("%s is not an environment variable name: use letters, digits and '_', not starting with a digit (write --secret NAME or --secret ENV=NAME)", quoteName(env))
	case name == "":
		return fmt.Errorf("no secret name after %s=: write --secret ENV=NAME", env)
	case !secretRefName.MatchString(name):
		return fmt.Errorf("secret name %s: use letters, digits, '_' and '-', not starting with a digit or '-' (see 'agentbox secret ls')", quoteName(name))
	case s.refs[env] != "":
		return fmt.Errorf("the variable %s is given twice: each --secret sets its own variable", env)
	}
	if s.refs == nil {
		s.refs = map[string]string{}
	}
	s.refs[env] = name
	return nil
}
