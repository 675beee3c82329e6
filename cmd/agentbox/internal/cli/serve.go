package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/httpserve"
	"github.com/spf13/cobra"
)

// ServerOptions configures the server of `agentbox serve` ([Config.NewServer]).
type ServerOptions struct {
	// StateDir holds the sandboxes the server manages, and its records.
	StateDir string
	// APIKeys are bearer tokens it accepts, besides the keys of its
	// records (ServerKeys); none at all: every request.
	APIKeys []string
	// Logf logs what clients are not told.
	Logf func(format string, args ...any)
	// Pool is how many sandbox inits the server keeps started ahead of
	// time, for faster creates (0: none).
	Pool int
	// PublishedImages are images of the local store every organization
	// may use (--publish-image); the others are invisible to clients.
	PublishedImages []string
	// AllowRegistries are registries on loopback or private addresses
	// builds may pull from (--allow-registry).
	AllowRegistries []string
	// BuildTimeout bounds each build (--build-timeout; 0: the server's
	// default).
	BuildTimeout time.Duration
	// MaxSandboxesPerOrg is each organization's quota of sandboxes
	// (--max-sandboxes-per-org; 0: the server's default, 64; negative:
	// no limit).
	MaxSandboxesPerOrg int
	// MaxQueuedBuildsPerOrg is how many builds each organization may
	// have waiting or running (--max-queued-builds-per-org; 0: the
	// server's default, 8; negative: no limit).
	MaxQueuedBuildsPerOrg int
	// MaxImageGiBPerOrg is how many GiB of the image store each
	// organization's images may take (--max-image-disk-per-org; 0: the
	// server's default, 50; negative: no limit).
	MaxImageGiBPerOrg int
	// PreviewDomain makes preview URLs host-based, PORT-ID.DOMAIN
	// (--preview-domain; empty: a listener per previewed port).
	PreviewDomain string
}

// Server is the server of `agentbox serve`: Daytona's control plane.
type Server interface {
	http.Handler
	// Close ends the server's background work, waiting for it until ctx
	// is done; the sandboxes keep running.
	Close(ctx context.Context) error
	// AuthRequired reports whether the server has API keys (of the
	// options or of its records); without, it accepts every request.
	AuthRequired() bool
}

// DefaultServeAddr is where `agentbox serve` listens without --addr.
const DefaultServeAddr = "127.0.0.1:3000"

// serveShutdownTimeout bounds the wait for requests in flight when serve
// stops.
const serveShutdownTimeout = 10 * time.Second

func (a *app) serveCommand() *cobra.Command {
	var addr, key, keyFile string
	var pool int
	var generate bool
	var opts ServerOptions
	c := &cobra.Command{
		Use:   "serve [--addr HOST:PORT] [--api-key-file FILE | --api-key KEY | --generate-key] [--pool N]",
		Short: "Serve Daytona's API over local sandboxes",
		Long: `Serve Daytona's control-plane API (and each sandbox's toolbox API) over the
sandboxes of the state dir, so that Daytona clients — the official SDKs,
Mastra's DaytonaSandbox — run against this machine, offline. Point them at it:

  DAYTONA_API_URL=http://127.0.0.1:3000/api DAYTONA_API_KEY=KEY

Sandboxes present as Daytona's do: user daytona, home and working directory
/home/daytona. They keep running when serve stops; the auto-stop and
auto-delete intervals run while serve does.

A sandbox's snapshot is an image of the local image store (agentbox image
pull|build, agentbox snapshot create, or Daytona's snapshots API); an SDK's
image is built with the local image builder, as agentbox image build does,
and its build log streamed to the SDK.

Serve keeps its records (sandboxes, names, labels, timers, volumes, keys) in
the state dir: a restart, even a kill -9, loses none, and the timers resume.
One serve at a time runs on a state dir.

With API keys every request must carry one as "Authorization: Bearer KEY":
keys made with 'agentbox serve keys create' (each of an organization, which
sees only its own sandboxes), or one given with --api-key-file (or --api-key,
which other users can read in the process list), or one --generate-key makes
for this run and prints once. Without any, serve accepts any request of this
machine, so it listens on loopback only and answers only loopback host names
(localhost, 127.0.0.1, [::1]; no DNS rebinding). Whatever the keys, requests
that change state must come from a client, not a web page of another site
(cross-origin requests and text/plain or form bodies are refused).

Clients' images are their organization's: a snapshot, a Dockerfile's FROM and
COPY --from name registry references (pulled anonymously, from public
addresses only unless --allow-registry allows a registry) or the
organization's snapshots; never a path of this host, and never the local
store's own images unless published with --publish-image NAME. Builds run one
per organization at a time, each for --build-timeout at most. Each
organization may have --max-sandboxes-per-org sandboxes (default 64); a create
past it is refused (403) until some are deleted. It may have
--max-queued-builds-per-org builds waiting or running (default 8; the next is
429), and its images may take --max-image-disk-per-org GiB of the store
(default 50; the next build is 403).

With --pool N (as root) serve keeps N sandbox inits started ahead of time,
each in namespaces of its own with its network link made: a new sandbox
takes one and starts in about half the time; serve
starts a replacement once it is up. Each spare holds a host uid range, a
network link and an idle process until serve stops.

A sandbox's preview URL (getPreviewLink) is by default a port of its own on
the address the client reached serve on (http://127.0.0.1:PORT): it resolves
everywhere, Node's and Python's resolvers included. Each previewed port of a
sandbox gets one, closed when the sandbox stops or is deleted; the sandbox's
preview token is needed as before. With wildcard DNS for *.DOMAIN reaching
serve, --preview-domain DOMAIN makes them http://PORT-ID.DOMAIN instead
(PORT-ID.localhost:PORT URLs keep working either way).

It runs until interrupted (Ctrl-C, SIGTERM), then ends the requests in flight.`,
		Example: `  agentbox serve
  agentbox serve --addr 0.0.0.0:3000 --api-key-file ~/.config/agentbox/api-key
  sudo agentbox serve --pool 2
  agentbox serve --generate-key --publish-image team/tools:1
  agentbox serve keys create --name ci --org team-a`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := apiKeys(cmd, key, keyFile)
			if err != nil {
				return err
			}
			shown := ""
			if generate {
				if len(keys) > 0 {
					return usagef("--generate-key and --api-key or --api-key-file exclude each other: give one")
				}
				shown = generateKey()
				keys = []string{shown}
			}
			if opts.BuildTimeout < 0 {
				return usagef("--build-timeout %v: give a positive duration (e.g. 30m)", opts.BuildTimeout)
			}
			if pool < 0 {
				return usagef("--pool %d: give how many spare inits to keep (0: none)", pool)
			}
			opts.APIKeys, opts.Pool = keys, pool
			return a.serve(cmd, addr, opts, shown)
		},
	}
	c.AddCommand(a.serveKeysCommand())
	f := c.Flags()
	f.StringVar(&addr, "addr", DefaultServeAddr, "the `HOST:PORT` to listen on")
	f.StringVar(&keyFile, "api-key-file", "", "read the API key clients must send from `FILE` (its first line)")
	f.StringVar(&key, "api-key", "", "the API `KEY` clients must send (visible to other users in the process list: prefer --api-key-file)")
	f.IntVar(&pool, "pool", 0, "keep `N` sandbox inits started ahead of time, for faster creates (root only)")
	f.BoolVar(&generate, "generate-key", false, "make a random API key for this run and print it once")
	f.StringArrayVar(&opts.PublishedImages, "publish-image", nil, "let every organization use the local store's image `NAME` (repeatable)")
	f.StringArrayVar(&opts.AllowRegistries, "allow-registry", nil, "let builds pull from the registry `HOST:PORT` although it is on a loopback or private address (repeatable)")
	f.DurationVar(&opts.BuildTimeout, "build-timeout", 0, "end each build after `DURATION` (default 30m)")
	f.IntVar(&opts.MaxSandboxesPerOrg, "max-sandboxes-per-org", 0, "let each organization have at most `N` sandboxes (default 64; -1: no limit)")
	f.IntVar(&opts.MaxQueuedBuildsPerOrg, "max-queued-builds-per-org", 0, "let each organization have at most `N` builds waiting or running (default 8; -1: no limit)")
	f.IntVar(&opts.MaxImageGiBPerOrg, "max-image-disk-per-org", 0, "let each organization's images take at most `GIB` of the image store (default 50; -1: no limit)")
	f.StringVar(&opts.PreviewDomain, "preview-domain", "", "make preview URLs http://PORT-ID.`DOMAIN` (wildcard DNS of *.DOMAIN must reach serve) instead of a loopback port per previewed port")
	return c
}

// apiKeys returns the API key of the flags, if any.
func apiKeys(cmd *cobra.Command, key, keyFile string) ([]string, error) {
	switch {
	case cmd.Flags().Changed("api-key") && cmd.Flags().Changed("api-key-file"):
		return nil, usagef("--api-key and --api-key-file exclude each other: give one")
	case cmd.Flags().Changed("api-key"):
		if strings.TrimSpace(key) == "" {
			return nil, usagef("--api-key is empty")
		}
		return []string{strings.TrimSpace(key)}, nil
	case keyFile != "":
		k, err := readFirstLine("--api-key-file", keyFile)
		if err != nil {
			return nil, err
		}
		return []string{k}, nil
	}
	return nil, nil
}

// readFirstLine returns the first line of the file a secret's flag names,
// trimmed; an empty line is a usage error.
func readFirstLine(flag, file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", flag, err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if k := strings.TrimSpace(first); k != "" {
		return k, nil
	}
	return "", usagef("%s %s: the first line is empty; write the secret there", flag, file)
}

// loopbackAddr reports whether addr's host is a loopback address (or
// localhost).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// generateKey returns a new random API key.
func generateKey() string {
	return "dtn_" + rand.Text() + rand.Text()
}

// serve runs the server of opts on addr until the command's context
// ends; generated is the key --generate-key made, printed once.
func (a *app) serve(cmd *cobra.Command, addr string, opts ServerOptions, generated string) error {
	ctx, out, errw := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	if a.cfg.NewServer == nil {
		return errors.New("this build of agentbox has no server")
	}
	opts.StateDir = a.stateDir
	opts.Logf = func(format string, args ...any) { fmt.Fprintf(errw, format+"\n", args...) }
	srv, err := a.cfg.NewServer(opts)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdownTimeout)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			fmt.Fprintf(errw, "agentbox serve: %v\n", err)
		}
	}()
	keyed := srv.AuthRequired()
	if !keyed && !loopbackAddr(addr) {
		return usagef("refusing to serve %s without an API key: anyone who reaches it could run commands here; create one (agentbox serve keys create) or pass --api-key-file FILE, or listen on loopback (--addr %s)", addr, DefaultServeAddr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "agentbox serve: Daytona API at %s/api, sandboxes in %s\n", url, a.stateDir)
	if !keyed {
		fmt.Fprintf(errw, "agentbox serve: warning: no API key: any process of this machine may use it (loopback only); pass --generate-key or --api-key-file FILE\n")
	}
	shownKey := "any"
	switch {
	case generated != "":
		shownKey = generated
	case keyed:
		shownKey = "<your key>"
	}
	fmt.Fprintf(out, "  export DAYTONA_API_URL=%s/api DAYTONA_API_KEY=%s\n", url, shownKey)
	if err := httpserve.Serve(ctx, ln, srv, serveShutdownTimeout); err != nil {
		return fmt.Errorf("serving %s: %w", addr, err)
	}
	fmt.Fprintf(out, "agentbox serve: stopped; the sandboxes keep running\n")
	return nil
}
