package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// NewImageBuilder returns a Dockerfile builder over the image store of
// stateDir ("" is DefaultStateDir): base images are pulled with pull's
// options when the store lacks them, RUN steps run in sandboxes of the
// state dir made of the step's base image (its Env, WorkingDir applied;
// no network with BlockNetwork, else the default network policy), and
// each step is cached in the store's folder build-cache.
func NewImageBuilder(stateDir string, pull image.PullOptions) (*build.Builder, error) {
	stateDir, err := useStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	st, err := OpenImageStore(stateDir)
	if err != nil {
		return nil, err
	}
	return &build.Builder{
		Store:    pullingStore{st, pull},
		Runner:   buildRunner{stateDir, st},
		CacheDir: filepath.Join(st.Dir(), "build-cache"),
	}, nil
}

// buildRunner runs the RUN steps of builds in sandboxes of a state dir: a
// build.Runner.
type buildRunner struct {
	stateDir string
	store    *image.Store
}

// Run runs step in a new sandbox made of base, then freezes what the
// command changed in the sandbox's root into a layer of the store and
// removes the sandbox. A base the store does not have yet (the image of a
// build's previous step), or one with an entrypoint, is saved first, as an
// intermediate image without entrypoint named for its content
// (intermediateName), which later builds reuse.
func (r buildRunner) Run(ctx context.Context, base *image.Image, step build.RunStep, logs io.Writer) (layer string, err error) {
	// A RUN step runs in the image without its entrypoint (as Docker's
	// does): the step's sandbox is made of an intermediate image without
	// one, so that no server of the image runs and writes into the layer.
	step0 := &image.Image{Layers: base.Layers, Config: base.Config}
	step0.Config.Entrypoint, step0.Config.Cmd = nil, nil
	ref := base.ID
	if ref == "" || len(base.Config.Entrypoint)+len(base.Config.Cmd) > 0 {
		step0.Names = []string{intermediateName(step0)}
		saved, err := r.store.Save(ctx, step0)
		if err != nil {
			return "", err
		}
		ref = saved.ID
	}
	sb, err := New(Options{
		ID:       "build-" + randomSuffix(),
		StateDir: r.stateDir,
		Config: Config{
			Image:   ref,
			Network: sandbox.BlockedIf(step.BlockNetwork),
			// A build step is never idle while it runs; the sandbox
			// goes with the step.
			AutoStopInterval: -1,
		},
	})
	if err != nil {
		return "", err
	}
	defer func() {
		if rerr := sb.Destroy(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = fmt.Errorf("remove the step's sandbox: %w", rerr)
		}
	}()
	res, err := sb.ExecuteCommand(ctx, runCommandLine(step.Args), nil, &sandbox.ExecOptions{
		Env:     stepEnv(base, step),
		Stdout:  logs,
		Stderr:  logs,
		Timeout: -1, // a build step takes the time it takes
		// The output goes to logs; the result keeps none of it worth
		// the name, so that a step printing gigabytes costs the builder
		// no memory.
		MaxRetainedBytes: 4 << 10,
	})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("the command %s returned a non-zero code: %d", strings.Join(step.Args, " "), res.ExitCode)
	}
	return freezeLayer(ctx, r.stateDir, sb.ID())
}

// intermediateName names the intermediate image of a build step's base:
// "agentbox-build:" and a digest of its layers and configuration.
func intermediateName(base *image.Image) string {
	b, _ := json.Marshal(struct {
		Layers []string
		Config image.Config
	}{base.Layers, base.Config})
	sum := sha256.Sum256(b)
	return "agentbox-build:" + hex.EncodeToString(sum[:6])
}

// runCommandLine returns the shell command line of a RUN's argv.
func runCommandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = sandbox.ShellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// stepEnv returns the build arguments of step a command sees besides its
// image's Env: a variable both set takes the image's value.
func stepEnv(base *image.Image, step build.RunStep) map[string]string {
	env := map[string]string{}
	for _, kv := range step.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for _, kv := range base.Config.Env {
		if k, _, ok := strings.Cut(kv, "="); ok {
			delete(env, k)
		}
	}
	return env
}

// randomSuffix returns 8 random hex digits.
func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
