// Package build builds local images from Dockerfiles: the subset Daytona's
// declarative image builder emits (FROM, RUN, ENV, WORKDIR, COPY, ADD,
// USER, ENTRYPOINT, CMD, ARG; LABEL and EXPOSE are accepted and have no
// effect on the image), and multi-stage builds (FROM … AS NAME, FROM an
// earlier stage, COPY --from=STAGE|INDEX|IMAGE).
//
// A [Builder] parses the Dockerfile and plans every step, checking the
// build context, before anything runs; it then adds one layer per RUN,
// COPY, ADD (and WORKDIR that makes a folder) to its [Store], running RUN
// steps through its [Runner]. Each step is cached by its inputs: the
// parent step, the instruction after variable substitution, the content of
// the files COPY and ADD take, and the build arguments a RUN sees. A step
// whose key is cached reuses its layer.
package build

import (
	"context"
	"io"

	"github.com/agentbox-dev/agentbox/local/image"
)

// Store is the image store a build reads its base image from and writes
// its layers and result to (an adapter over *image.Store).
type Store interface {
	// Resolve returns the image ref names, pulling it when the store does
	// not have it; the error matches image.ErrNotFound when there is none.
	Resolve(ctx context.Context, ref string) (*image.Image, error)
	// AddLayer makes a layer of the store from the files fill writes into
	// the empty folder dir (owners as the image sees them), and returns the
	// layer's folder.
	AddLayer(ctx context.Context, fill func(dir string) error) (string, error)
	// Save records an image made of layers of the store under img.Names,
	// taking a name from an older image that has it (a rebuild moves its
	// tag, as with docker build).
	Save(ctx context.Context, img *image.Image) (*image.Image, error)
}

// Runner runs the RUN steps of a build.
type Runner interface {
	// Run runs step in a sandbox whose root is base's layers (writable
	// through an upper layer) with base's Config applied (Env, WorkingDir,
	// User), streaming the command's output to logs, and returns the
	// folder of the layer of the store made of what the command wrote. A
	// command that exits non-zero is an error.
	Run(ctx context.Context, base *image.Image, step RunStep, logs io.Writer) (layerDir string, err error)
}

// RunStep is one RUN instruction for a [Runner].
type RunStep struct {
	// Line is the instruction's line in the Dockerfile.
	Line int
	// Args is the command: the exec form's array, or
	// ["/bin/sh", "-c", TEXT] for the shell form.
	Args []string
	// Env are the build arguments in effect (NAME=VALUE): those ARG
	// declared, and the proxy ones (HTTP_PROXY, https_proxy, NO_PROXY, …)
	// given, which the command sees in addition to the image's Config.Env
	// (a variable both set takes the Config.Env value).
	Env []string
	// BlockNetwork: the command gets no network access.
	BlockNetwork bool
}

// Builder builds images into a Store.
type Builder struct {
	Store  Store
	Runner Runner
	// CacheDir is the folder of the step cache (a file per cache key),
	// created when missing; "" turns caching off.
	CacheDir string
}

// Options describe one build.
type Options struct {
	// ContextDir is the build context: the folder COPY and ADD take files
	// from, minus those its .dockerignore file excludes.
	ContextDir string
	// Dockerfile is the Dockerfile's path; "" means ContextDir/Dockerfile.
	Dockerfile string
	// Names are the names the image is saved as. With none, the image is
	// built (and its steps cached) but not saved: the result has no ID.
	Names []string
	// Target is the stage (FROM … AS Target) that is the image; later
	// stages are not built. "" is the last stage.
	Target string
	// BuildArgs set the values of ARGs (--build-arg NAME=VALUE).
	BuildArgs map[string]string
	// NoCache runs every step even when cached (the cache is refreshed).
	NoCache bool
	// BlockNetwork runs RUN steps without network access.
	BlockNetwork bool
	// Logs receive the build's progress ("Step 2/5 : RUN …", "Using
	// cache") and the RUN commands' output; nil discards them.
	Logs io.Writer
}
