// Package local runs sandboxes on this Linux machine, isolated with Linux
// namespaces: the embedded default engine of agentbox.
//
// A sandbox is a set of namespaces (user, mount, pid, ipc, uts, cgroup,
// and net when [Options.NetworkBlockAll] is set) whose PID 1 is this very
// program, re-executed: call [Init] first thing in main (and in TestMain),
// so that the re-executed copy becomes the sandbox's init instead of
// running your program again. The package's own init function calls Init
// too, before any init function of the importing packages and before
// main: a program that forgets the call (or whose other init functions
// have side effects, such as opening files or starting goroutines) still
// never runs them or its main as a sandbox init. The explicit call remains
// the documented entry point. The init serves the Daytona toolbox API
// (package toolbox/daemon) on a unix socket in the sandbox's state folder,
// reaps orphans, stops itself after [Options.AutoStopInterval] without a
// request, and outlives the process that started it: another process
// reconnects by id, as with a Daytona sandbox. The init stamps each use of
// the API (to within a second) where every process sees it:
// sandbox.Info.LastUsedAt, and TimeoutAt when it will stop itself.
//
// Inside, the host's /usr and /etc (and the /bin, /lib … links or folders)
// are read-only; /proc, /dev and the root are the sandbox's own; the home
// (/home/<user>, the default working directory), /tmp and the working
// directory are folders of the state dir, so everything written there
// persists across Stop and Start (an [Options.Ephemeral] sandbox is deleted,
// files and all, when it stops). Commands run as uid 0 of the user
// namespace, which is host uid 100000 when the engine runs as root (a
// shifted range of 65536 ids) and the caller's own uid otherwise, and with
// no capabilities at all (empty bounding, permitted, effective, inheritable
// and ambient sets, and no_new_privs): root inside cannot mount, remount the
// read-only system folders, or regain capabilities through setuid or
// file-capability programs. As root,
// each sandbox also gets its own cgroups (v1 or v2), used to account its
// memory and to make sure Stop and Destroy leave no process; commands see
// them as the root of a cgroup namespace (/proc/self/cgroup shows "/").
//
// Start reports [sandbox.OutcomeCreated] only for a sandbox new to the
// state dir; finding one by id, running or stopped (and then restarted
// with its files), is [sandbox.OutcomeConnected], as Mastra reports for a
// Daytona sandbox it finds.
//
// Some options differ from Daytona's wire values: [Options.AutoStopInterval]
// 0 means the default of 15 minutes and a negative value never (Daytona: 0
// is never); [Options.AutoDeleteInterval] 0 (or negative) means never
// (Daytona: -1 is never and 0 deletes at once). No process watches a
// stopped sandbox: one past its AutoDeleteInterval, or a stopped
// ephemeral one, is deleted when a host process next looks at the state
// dir (Start of that id, [List], [Lookup]).
//
// State lives under a state dir (see [DefaultStateDir]):
//
//	<StateDir>/sandboxes/<id>/   meta.json, toolbox.sock, home/, tmp/, workdir/, toolbox/
//	<StateDir>/volumes/<name>/   named volumes, shareable between sandboxes
//
// [List], [Lookup], [StopByID] and [Remove] work on a state dir by id, from
// any process.
package local
