// Command agentbox runs commands in isolated sandboxes on this machine.
//
// Usage:
//
//	agentbox exec [--id SANDBOX] [--timeout DUR] [--env K=V]... [--cwd DIR] [-i] [--block-network] -- CMD [ARG...]
//	agentbox exec -i [flags] < SCRIPT
//	agentbox spawn [--id SANDBOX] [--timeout DUR] [--env K=V]... [--cwd DIR] -- CMD [ARG...]
//	agentbox ps [--id SANDBOX]
//	agentbox logs [--id SANDBOX] [-f] ID
//	agentbox kill [--id SANDBOX] ID...
//	agentbox shell [--id SANDBOX] [-- CMD [ARG...]]
//	agentbox sandbox ls | info ID | stop ID... | rm ID...
//	agentbox sandbox network ID [--default | --block-all | --allow-cidr LIST | --allow-domain LIST]
//	agentbox ports publish ID PORT[:SANDBOXPORT] | ls ID | rm ID PORT
//	agentbox image pull [--platform OS/ARCH] [--registry-mirror HOST]... [--insecure] IMAGE... | ls | rm IMAGE... | prune
//	agentbox git clone [--id SANDBOX] [--branch B] [--commit C] [--depth N] [--username U --password-stdin] URL [DIR]
//	agentbox image build [-f DOCKERFILE] [-t NAME]... [--build-arg K=V]... [--target STAGE] [--no-cache] [--network default|none] [CONTEXT]
//	agentbox serve [--addr HOST:PORT] [--api-key-file FILE | --api-key KEY]
//	agentbox mcp [--id SANDBOX] [--workdir DIR] [--approve] [--http HOST:PORT [--token-file FILE]]
//
// --id names the sandbox. The ID of logs and kill is that of a background
// process: the number spawn prints and ps lists in its ID column (1, 2,
// ...), agentbox's numbering, not a PID inside the sandbox.
//
// Global flags: --state-dir DIR (default $AGENTBOX_STATE_DIR, else
// $XDG_STATE_HOME/agentbox, else ~/.local/state/agentbox, else
// $XDG_RUNTIME_DIR/agentbox; it must be private to the user), --engine
// NAME (default $AGENTBOX_ENGINE, else local) and --json
// for machine-readable output: event streams for exec and logs -f, JSON
// errors with a stable code ("agentbox help json"). Run "agentbox help
// COMMAND" for details, exit codes included.
//
// Install it with "go install ./cmd/agentbox", or run it with "go run
// ./cmd/agentbox".
//
// The binary is also the init of every sandbox it creates: the sandbox
// re-executes it, and local.Init, called first in main, takes over then.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
)

func main() {
	local.Init() // returns only when this process is not a sandbox's init
	os.Exit(run(os.Args[1:]))
}

// run executes the command line args and returns the exit code. SIGINT and
// SIGTERM cancel the work (killing the command exec runs), and agentbox
// exits 130 or 143 (128 + the signal's number); a second signal ends
// agentbox at once.
func run(args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case sig := <-sigs:
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			cancel(&cli.Interrupt{Signal: sig.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	// A closed output pipe (agentbox exec -- yes | head) must not kill
	// agentbox before it kills the command in the sandbox: with SIGPIPE
	// caught, writes fail with EPIPE instead and exec ends the command.
	// Caught, not ignored, so that the processes agentbox starts (the
	// sandbox init) get the default disposition back.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return cli.Run(ctx, cli.Config{
		Engine:     localEngine{},
		Engines:    engines(),
		NewServer:  newServer,
		ServerKeys: serverKeys{},
		ImageBuilder: func(_ context.Context, stateDir string) (*build.Builder, error) {
			return local.NewImageBuilder(stateDir, image.PullOptions{})
		},
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	}, args)
}

// engines are the engines --engine selects besides the local one.
func engines() map[string]cli.Engine {
	return map[string]cli.Engine{"daytona": daytonaEngine{}}
}
