package cli

import (
	"github.com/agentbox-dev/agentbox/internal/redact"

	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/spf13/cobra"
)

// gitCloneOptions are the flags of `agentbox git clone`.
type gitCloneOptions struct {
	id            string
	branch        string
	commit        string
	depth         int
	username      string
	passwordStdin bool
}

func (a *app) gitCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "git",
		Short: "Work with git repositories in a sandbox",
		Args:  noArgs,
		RunE:  groupRunE,
	}
	c.AddCommand(a.gitCloneCommand())
	return c
}

func (a *app) gitCloneCommand() *cobra.Command {
	var o gitCloneOptions
	c := &cobra.Command{
		Use:   "clone [flags] URL [DIR]",
		Short: "Clone a git repository into a sandbox",
		Long: `Clone a git repository into a sandbox.

The sandbox (created or restarted if needed) clones URL itself, with no git
binary: an http(s) URL, or a path or file:// URL inside the sandbox. DIR is
taken from the sandbox's working directory; by default it is the last
part of URL without ".git", as with git clone. A failed clone leaves
nothing behind.

For a private repository give --username and the password or token on
standard input with --password-stdin; it is sent to the sandbox for this
clone only, never written to disk nor shown in errors.`,
		Example: `  agentbox git clone https://github.com/octocat/Hello-World
  agentbox git clone --branch dev --depth 1 https://example.com/repo.git src
  echo "$TOKEN" | agentbox git clone --username x-access-token --password-stdin https://github.com/me/private.git`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("git clone needs URL and optionally DIR, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 2 {
				dir = args[1]
			}
			return a.gitClone(cmd.Context(), cmd.OutOrStdout(), cmd.InOrStdin(), o, args[0], dir)
		},
	}
	f := c.Flags()
	f.StringVar(&o.id, "id", DefaultID, "the `SANDBOX` to clone into")
	f.StringVarP(&o.branch, "branch", "b", "", "check out `BRANCH` instead of the remote's default")
	f.StringVar(&o.commit, "commit", "", "check out `COMMIT` (a detached HEAD) after cloning")
	f.IntVar(&o.depth, "depth", 0, "make a shallow clone of `N` commits (ignored for local paths, as by git)")
	f.StringVar(&o.username, "username", "", "the `USER` to authenticate as over http(s)")
	f.BoolVar(&o.passwordStdin, "password-stdin", false, "read the password or token from standard input (its first line)")
	return c
}

// gitCloneResult is the --json form of git clone.
type gitCloneResult struct {
	Sandbox string `json:"sandbox"`
	URL     string `json:"url"`
	Path    string `json:"path"`
}

// gitClone clones rawURL into dir (its default when empty) in the sandbox
// o.id.
func (a *app) gitClone(ctx context.Context, stdout io.Writer, stdin io.Reader, o gitCloneOptions, rawURL, dir string) error {
	if o.depth < 0 {
		return usagef("--depth must not be negative, got %d", o.depth)
	}
	if dir == "" {
		dir = cloneDir(rawURL)
		if dir == "" {
			return usagef("cannot tell a folder name from %q; give DIR", redact.URL(rawURL))
		}
	}
	req := toolbox.GitCloneRequest{URL: rawURL, Path: dir, Branch: o.branch, CommitID: o.commit, Depth: o.depth, Username: o.username}
	if o.passwordStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading the password from standard input: %w", err)
		}
		req.Password = strings.TrimRight(line, "\r\n")
		if req.Password == "" {
			return usagef("--password-stdin: standard input holds no password")
		}
	}
	box, err := a.engine.Open(ctx, OpenOptions{StateDir: a.stateDir, ID: o.id})
	if err != nil {
		return fmt.Errorf("open sandbox %q: %w", o.id, err)
	}
	defer box.Detach(context.WithoutCancel(ctx))
	tb, ok := box.(toolboxBox)
	if !ok {
		return fmt.Errorf("sandbox %q: its engine offers no git operations: %w", o.id, errors.ErrUnsupported)
	}
	if _, err := box.Start(ctx); err != nil {
		return startFailed(ctx, o.id, err)
	}
	if err := tb.Client().GitClone(ctx, req); err != nil {
		return fmt.Errorf("sandbox %q: git clone %s: %w", o.id, redact.URL(rawURL), err)
	}
	if a.json {
		return writeJSON(stdout, gitCloneResult{Sandbox: o.id, URL: redact.URL(rawURL), Path: dir})
	}
	fmt.Fprintf(stdout, "cloned %s into %s\n", redact.URL(rawURL), dir)
	return nil
}

// cloneDir is the folder git clone makes for rawURL: its last path
// element without ".git".
func cloneDir(rawURL string) string {
	p := rawURL
	if u, err := url.Parse(rawURL); err == nil && u.Scheme != "" {
		p = u.Path
	} else if i := strings.LastIndexByte(p, ':'); i >= 0 && !strings.HasPrefix(p, "/") {
		p = p[i+1:] // scp-like user@host:path
	}
	base := strings.TrimSuffix(path.Base(strings.TrimRight(p, "/")), ".git")
	if base == "." || base == "/" || base == ".." {
		return ""
	}
	return base
}
