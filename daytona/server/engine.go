package server

import (
	"context"
	"math"
	"net"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// An engine runs the sandboxes the server records: the local engine in
// production (localEngine), an in-process stand-in in some tests. Every
// id is a sandbox id of the server. Methods that find no such sandbox
// return an error matching sandbox.ErrNotFound.
type engine interface {
	// create checks spec and returns the function that creates and
	// starts sandbox id; a spec the engine refuses fails here, before
	// anything exists.
	create(id string, spec spec) (func(context.Context) (sizes, error), error)
	// start starts the stopped sandbox id with the files it had, its
	// commands getting env.
	start(ctx context.Context, id string, env map[string]string) error
	// stop ends every process of sandbox id and keeps its files.
	stop(ctx context.Context, id string) error
	// remove destroys sandbox id: processes and files.
	remove(ctx context.Context, id string) error
	// status says whether sandbox id runs and when its toolbox was last
	// used.
	status(ctx context.Context, id string) (engineStatus, error)
	// setNetwork changes the network policy of sandbox id, live when it
	// runs.
	setNetwork(ctx context.Context, id string, n sandbox.NetworkPolicy) error
	// dial connects to the toolbox API of the running sandbox id.
	dial(ctx context.Context, id string) (net.Conn, error)
	// removeVolume deletes the named volume's files.
	removeVolume(ctx context.Context, name string) error
	// hasImage reports whether the engine has the image or snapshot ref
	// (spec.image).
	hasImage(ctx context.Context, ref string) (bool, error)
	// dialPort connects to TCP port of the running sandbox id, publishing
	// nothing on the host.
	dialPort(ctx context.Context, id string, port int) (net.Conn, error)
	// The lifecycle beyond start and stop: fork, pause, resume and
	// snapshots of sandboxes (engine_lifecycle.go).
	lifecycleEngine
	// Secrets (secretsandbox.go).
	secretsEngine
	// Metrics and network views (metrics.go).
	metricsEngine
}

// spec is what a sandbox is created with.
type spec struct {
	name    string
	user    string
	env     map[string]string
	network sandbox.NetworkPolicy
	// resources are the limits asked for; a zero field is the engine's
	// default. (The API's whole cores and GiB are converted at its edge:
	// sizes.resources.)
	resources sandbox.Resources
	// volumes name the engine's volumes in VolumeID.
	volumes  []volume
	language string
	// image is the image or snapshot of the engine's store the sandbox's
	// root is made of (Daytona's snapshot); "" for the default root.
	image string
	// daytonaToolbox runs the sandbox's toolbox in its Daytona-behaviour
	// mode (a test knob).
	daytonaToolbox bool
	// secrets are the secrets the sandbox holds, with their values
	// (secretsandbox.go).
	secrets []sandbox.Secret
}

// sizes are the resources a created sandbox has, in Daytona's units
// (cores, GiB); 0 when unlimited or unknown.
type sizes struct {
	cpu, memoryGiB, diskGiB float64
}

// engineStatus is what status reports.
type engineStatus struct {
	running  bool
	paused   bool      // frozen with its memory kept (running is then false)
	lastUsed time.Time // zero when never used
}

// resources returns z, in Daytona's units (cores, GiB), as
// sandbox.Resources (cores, MiB).
func (z sizes) resources() sandbox.Resources {
	return sandbox.Resources{CPUCores: z.cpu, MemoryMiB: int64(math.Round(z.memoryGiB * 1024)), DiskMiB: int64(math.Round(z.diskGiB * 1024))}
}
