package cli

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

// ImageBuilderFunc returns the builder of `agentbox image build` for the
// images of stateDir: its image store, the runner of RUN steps and the
// folder of its step cache.
type ImageBuilderFunc func(ctx context.Context, stateDir string) (*build.Builder, error)

// errImageBuildNotWired is the error of image build when Config has no
// ImageBuilder.
var errImageBuildNotWired = errors.New("image build is not wired into this agentbox: it has no image store or runner for builds (cli.Config.ImageBuilder is nil)")

// imageBuildOptions are the flags of `agentbox image build`.
type imageBuildOptions struct {
	file      string
	tags      []string
	buildArgs []string
	noCache   bool
	network   string
	target    string
}

func (a *app) imageBuildCommand() *cobra.Command {
	var o imageBuildOptions
	c := &cobra.Command{
		Use:   "build [flags] [CONTEXT]",
		Short: "Build an image from a Dockerfile",
		Long: `Build an image from a Dockerfile and keep it as a local image.

CONTEXT is the folder COPY and ADD take files from (default: the current
folder), minus what its .dockerignore excludes; the Dockerfile is
CONTEXT/Dockerfile unless -f names another. Each RUN runs in a sandbox
over the image built so far; each step is cached by its inputs (the step
before it, the instruction after substitution, the files COPY and ADD
take, the build arguments RUN sees), so an unchanged build reuses every
layer. The build's progress and the output of RUN steps are streamed.

Supported instructions: FROM (stages with AS NAME; the last one is the
image), RUN, CMD, ENTRYPOINT, ENV, ARG, WORKDIR, USER, COPY and ADD from
the context (--chown, --chmod, globs; ADD extracts local tar archives and
does not fetch URLs), COPY --from=STAGE|IMAGE; LABEL and EXPOSE are
accepted and change nothing. Any other instruction fails the build before
anything runs, naming its line.

Without -t the image is built and its steps cached, but not kept.`,
		Example: `  agentbox image build -t myapp:1 .
  agentbox image build -f docker/Dockerfile.dev -t dev --build-arg VERSION=3.12 .
  agentbox image build --network none -t offline ./ctx`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("image build takes at most one CONTEXT folder, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			contextDir := "."
			if len(args) == 1 {
				contextDir = args[0]
			}
			return a.imageBuild(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o, contextDir)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.file, "file", "f", "", "the `DOCKERFILE` to build (default: CONTEXT/Dockerfile)")
	f.StringArrayVarP(&o.tags, "tag", "t", nil, "name the image `NAME` (repeatable)")
	f.StringArrayVar(&o.buildArgs, "build-arg", nil, "set the build argument `NAME=VALUE` (repeatable; NAME alone takes the value from the environment)")
	f.StringVar(&o.target, "target", "", "build the stage `NAME` (FROM … AS NAME) as the image, not the last one")
	f.BoolVar(&o.noCache, "no-cache", false, "run every step, even those cached")
	f.StringVar(&o.network, "network", "default", "the network of RUN steps: `default` (the sandboxes' default policy) or none")
	return c
}

// imageBuild runs `agentbox image build`.
func (a *app) imageBuild(ctx context.Context, stdout, stderr io.Writer, o imageBuildOptions, contextDir string) error {
	args, err := parseBuildArgs(o.buildArgs, a.cfg.Getenv)
	if err != nil {
		return err
	}
	if o.network != "default" && o.network != "none" {
		return usagef("--network %q: use default or none", o.network)
	}
	for _, t := range o.tags {
		if t == "" || strings.ContainsAny(t, " \t\n") {
			return usagef("-t %q: an image name has no spaces and is not empty", t)
		}
	}
	if a.cfg.ImageBuilder == nil {
		return errImageBuildNotWired
	}
	b, err := a.cfg.ImageBuilder(ctx, a.stateDir)
	if err != nil {
		return err
	}
	logs := stdout
	if a.json {
		logs = stderr // stdout carries the JSON document only
	}
	img, err := b.Build(ctx, build.Options{
		ContextDir:   contextDir,
		Dockerfile:   o.file,
		Names:        o.tags,
		Target:       o.target,
		BuildArgs:    args,
		NoCache:      o.noCache,
		BlockNetwork: o.network == "none",
		Logs:         logs,
	})
	if errors.Is(err, image.ErrNotFound) {
		return withKind(KindNotFound, 0, err)
	}
	if err != nil {
		return err
	}
	if a.json {
		return writeJSON(stdout, img)
	}
	return nil
}

// parseBuildArgs turns --build-arg flags into a map. NAME alone takes the
// value of the environment variable NAME, and is left out when there is
// none (as docker build does). Errors name arguments, never values.
func parseBuildArgs(flags []string, getenv func(string) string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for i, kv := range flags {
		name, value, ok := strings.Cut(kv, "=")
		if !sandbox.ValidEnvName(name) {
			return nil, usagef("--build-arg #%d: invalid name %s: names must match [A-Za-z_][A-Za-z0-9_]* (write --build-arg NAME=VALUE)", i+1, quoteName(name))
		}
		if !ok {
			if value = getenv(name); value == "" {
				continue
			}
		}
		out[name] = value
	}
	return out, nil
}
