// Package daytona talks to Daytona's control plane and runs agentbox
// sandboxes on it.
//
// # The engine
//
// [New] returns a [Sandbox], a sandbox.Sandbox whose sandbox Daytona (or
// any server of its API, such as agentbox serve) runs, with the behaviour
// of Mastra's DaytonaSandbox: the options and defaults of [Options];
// creation from a snapshot, else an image (built, its logs streamed to
// Options.BuildLogs), else the default snapshot, Resources counting only
// with an image; reconnection by Daytona id or name (running: connect;
// stopped or archived: start; transitional: wait; dead: delete and create
// anew; any other lookup error fails without creating); the environment
// applied per command, never at creation; one retry of a command whose
// sandbox turns out dead (auto-stopped, deleted behind its back); Info and
// Instructions as Mastra words them. Commands and background processes go
// through the toolbox at the sandbox's toolbox proxy URL with the same
// toolbox.Client and toolbox/process code as the local engine, so a
// command on a started sandbox costs one request against agentbox's
// toolbox server. [Sandbox.Client] gives the toolbox client (files, git,
// sessions).
//
// # The control-plane client
//
// [Client] is a typed client of the parts of Daytona's control-plane API
// (the API described by Daytona's api.json) that the engine needs:
// sandboxes (create, get, list, start, stop, archive, delete, labels,
// network settings, auto-stop/archive/delete intervals, preview URLs, the
// toolbox proxy URL, build logs), snapshots (create, get, list, build
// logs), volumes (create, get, list, delete) and /config.
//
// [Client.BuildSnapshot] builds a snapshot of an [Image], a declarative
// image as Daytona's SDKs make them (a base image, then commands,
// environment, working directory, entrypoint…, rendered by
// [Image.Dockerfile]) or a Dockerfile given whole, streaming its build
// logs and waiting until it is active; a failed build is a
// [*SnapshotFailedError] with Daytona's reason.
//
// It is hand-written from api.json rather than generated. The spec has
// some 200 operations of which the engine needs about 30; generators
// (oapi-codegen, ogen) would bring thousands of lines of types to keep in
// step, closed enums and strict decoding — what broke Daytona's own
// generated Go clients each time the service added a field (their PR
// #5020). Here every type decodes leniently: unknown fields are ignored
// and enumerations ([SandboxState], [SnapshotState], …) are open string
// types, so a value this package does not know passes through. The tests
// check every request and answer of the client against api.json
// (internal/spectest), which keeps the hand-written shapes honest.
//
// # Configuration
//
// [NewClient] takes a [Config]; [ConfigFromEnv] fills one the way Daytona's
// SDKs do: DAYTONA_API_KEY, or DAYTONA_JWT_TOKEN with
// DAYTONA_ORGANIZATION_ID; DAYTONA_API_URL (default
// https://app.daytona.io/api); DAYTONA_TARGET; each read from the
// environment or else from a .env file in the working directory (read
// with github.com/joho/godotenv, never written into the process's
// environment).
//
// # Errors and retries
//
// Every error answer is an [*APIError] (status, code, message), which
// matches sentinel errors with errors.Is: [ErrNotFound] (and
// sandbox.ErrNotFound), [ErrConflict], [ErrUnauthorized], [ErrForbidden],
// [ErrBadRequest], [ErrRateLimited], [ErrUnavailable]. A server that cannot
// be reached gives an error naming the URL and DAYTONA_API_URL.
//
// Idempotent calls (GET, PUT, DELETE and the POSTs that set a value) are
// retried with jittered exponential backoff after a 5xx answer or a
// transport error; every call is retried after 429 and 503, which mean
// the request was not acted on, waiting as Retry-After says.
//
// # Waiting for states
//
// [Client.WaitForState] polls a sandbox as the SDKs do (every 100 ms for
// 5 s, then 1.1 times longer each poll up to 1 s), and the lifecycle
// helpers ([Client.CreateAndWait], [Client.StartAndWait],
// [Client.StopAndWait]) wait for their target states.
//
// # Bucket mounts
//
// [Sandbox] implements sandbox.Mounter as Mastra's DaytonaSandbox does:
// [Sandbox.Mount] runs s3fs or gcsfuse (package mount's plans) inside the
// remote sandbox, installing it with apt when missing, with credential
// files private to the sandbox's user (0600 in a 0700 folder) that
// [Sandbox.Unmount] removes; markers in /tmp/.mastra-mounts ("path|config
// hash", Mastra's names) make a repeated mount a no-op and a changed one a
// remount, and let a handle that connects to a running sandbox adopt its
// mounts. Every start (revivals included) mounts again what the handle
// mounted; Info lists the mounts and their states.
package daytona
