package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/spf13/cobra"
)

// shellOptions are the options of `agentbox shell`.
type shellOptions struct {
	open OpenOptions
	// command is the shell command line to run in the terminal; "" runs
	// an interactive login shell.
	command string
	// term is the TERM the sandbox's programs get ("" for the server's
	// default).
	term string
}

// A terminal is the local terminal agentbox runs in (shell_unix.go).
type terminal interface {
	// Size returns the terminal's width and height.
	Size() (cols, rows int, err error)
	// MakeRaw puts the terminal in raw mode (no echo, no line editing,
	// keys such as Ctrl-C passed on as bytes) until restore is called.
	MakeRaw() (restore func(), err error)
	// Resized delivers a value whenever the terminal's size changes,
	// until stop is called.
	Resized() (ch <-chan struct{}, stop func())
}

// A toolboxBox is a sandbox whose toolbox API the CLI can reach, for what
// sandbox.Sandbox does not cover (terminals, git), as the local engine's
// sandboxes are.
type toolboxBox interface {
	Client() *toolbox.Client
}

func (a *app) shellCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "shell [flags] [-- COMMAND [ARG...]]",
		Short: "Open an interactive terminal in a sandbox",
		Long: `Open an interactive terminal in a sandbox: a login shell, or COMMAND.

The sandbox is created (or restarted) if needed and keeps running afterwards.
The local terminal is put in raw mode, so that every key, Ctrl-C included,
goes to the program in the sandbox; window size changes follow. Leaving the
shell (exit, Ctrl-D) ends the terminal and kills what it still runs.

Standard input must be a terminal: to run a script, use
'agentbox exec -i < script' instead.

Exit codes: the shell's or COMMAND's own; 2 when standard input is not a
terminal; 1 when the terminal could not be opened (the message says why);
130 after SIGINT and 143 after SIGTERM sent to agentbox (not Ctrl-C, which
goes to the sandbox).`,
		Example: `  agentbox shell
  agentbox shell --id build
  agentbox shell -- python3
  agentbox shell -- top -d 1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			o := shellOptions{open: OpenOptions{StateDir: a.stateDir, ID: id}, term: a.cfg.Getenv("TERM")}
			if len(args) > 0 {
				o.command = sandbox.CommandLine(args[0], args[1:])
				if err := checkLine("shell", o.command); err != nil {
					return err
				}
			}
			t, err := openTerminal(a.cfg.Stdin)
			if err != nil {
				return err
			}
			return a.shell(cmd.Context(), t, a.cfg.Stdin, cmd.OutOrStdout(), o)
		},
	}
	fs := c.Flags()
	fs.SetInterspersed(false)
	addIDFlag(fs, &id)
	return c
}

// shell runs an interactive terminal in the sandbox o names, over the
// local terminal t, reading keys from in and writing the output to out.
func (a *app) shell(ctx context.Context, t terminal, in io.Reader, out io.Writer, o shellOptions) error {
	box, err := a.engine.Open(ctx, o.open)
	if err != nil {
		return fmt.Errorf("open sandbox %q: %w", o.open.ID, err)
	}
	defer box.Detach(context.WithoutCancel(ctx))
	tb, ok := box.(toolboxBox)
	if !ok {
		return fmt.Errorf("sandbox %q: this engine has no terminals: %w", o.open.ID, errors.ErrUnsupported)
	}
	if _, err := box.Start(ctx); err != nil {
		return startFailed(ctx, o.open.ID, err)
	}
	cols, rows, err := t.Size()
	if err != nil {
		return fmt.Errorf("reading the terminal's size: %w", err)
	}
	req := toolbox.PtyCreateRequest{ID: "agentbox-shell-" + randomID(), Cols: clampSize(cols), Rows: clampSize(rows), Command: o.command}
	if o.term != "" {
		req.Envs = map[string]string{"TERM": o.term}
	}
	client := tb.Client()
	p, err := client.OpenPty(ctx, req)
	if err != nil {
		return fmt.Errorf("sandbox %q: opening a terminal: %w", o.open.ID, err)
	}
	defer p.Close()
	// The terminal ends with agentbox: whatever it still runs is killed.
	defer client.DeletePty(context.WithoutCancel(ctx), req.ID)

	restore, err := t.MakeRaw()
	if err != nil {
		return fmt.Errorf("putting the terminal in raw mode: %w", err)
	}
	defer restore()
	resized, stopResize := t.Resized()
	defer stopResize()
	if c, r, err := t.Size(); err == nil && (c != cols || r != rows) {
		_ = p.Resize(ctx, clampSize(c), clampSize(r)) // resized before we listened
	}
	// Keys: read until agentbox exits (a read of a terminal cannot be
	// interrupted; the goroutine ends with the process).
	go func() { _, _ = io.Copy(p, in) }()
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, p)
		copied <- err
	}()
	for {
		select {
		case <-resized:
			if c, r, err := t.Size(); err == nil {
				_ = p.Resize(ctx, clampSize(c), clampSize(r))
			}
		case err := <-copied:
			if err != nil {
				return fmt.Errorf("writing the terminal's output: %w", err)
			}
			code, err := p.Wait(ctx)
			if err != nil {
				return fmt.Errorf("sandbox %q: %w", o.open.ID, err)
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// clampSize keeps a terminal dimension within what the server accepts.
func clampSize(n int) int {
	return max(1, min(n, toolbox.MaxPtySize))
}

// randomID returns 8 random hex digits.
func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
