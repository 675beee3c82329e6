// Package local runs sandboxes on this Linux machine, isolated with Linux
// namespaces: the embedded default engine of agentbox.
//
// A sandbox is a set of namespaces (user, mount, pid, ipc, uts, cgroup and
// net, unless [Config.Network] in the host mode shares the host's) whose PID 1 is this very
// program, re-executed: call [Init] first thing in main (and in TestMain),
// so that the re-executed copy becomes the sandbox's init instead of
// running your program again. The package's own init function calls Init
// too, before any init function of the importing packages and before
// main: a program that forgets the call (or whose other init functions
// have side effects, such as opening files or starting goroutines) still
// never runs them or its main as a sandbox init. The explicit call remains
// the documented entry point. The init serves the Daytona toolbox API
// (package toolbox/daemon) on a unix socket in the sandbox's state folder,
// reaps orphans, stops itself after [Config.AutoStopInterval] without a
// request, and outlives the process that started it: another process
// reconnects by id, as with a Daytona sandbox. The init stamps each use of
// the API (to within a second) where every process sees it:
// sandbox.Info.LastUsedAt, and TimeoutAt when it will stop itself.
//
// When the engine runs as root, each sandbox's ids 0 to 65535 are a range
// of 65536 host uids (and gids) of its own, given from a pool recorded in
// the state dir (from [DefaultHostIDBase], or [Options.HostIDBase]) and
// kept until the sandbox is removed; its user namespace belongs to the
// range's first uid. So no two sandboxes share a file owner, kernel key
// quota or /proc/keys view, or a per-user counter of the kernel (inotify
// instances, pending signals …), with each other or with root. Its home,
// /tmp and working directory belong to its range on the host. Volumes
// keep, on disk, the owners files have inside (0 for what a sandbox's
// root makes), and every sandbox sees them through an ID-mapped mount as
// its own ids, so sandboxes share them whatever their ranges; the volumes
// folder is closed to other users. Otherwise (not root) the sandbox's
// only uid is the caller's own.
//
// Inside, the root is writable when this process runs as root: made of
// the host's system folders (each of /usr and dpkg's database an overlay
// of the host's folder, ID-mapped onto the sandbox's ids, and a copy of
// the host's /etc holding only what every host user may read), or of an
// image ([Config.Image], [Config.Snapshot]), whose changes
// [Sandbox.CreateSnapshot] freezes into a snapshot that new sandboxes are made
// of; either way changes are kept across Stop and Start and stay in the
// sandbox. Without root, the host's /usr and /etc (and the /bin, /lib …
// links or folders) are read-only. /proc, /dev and
// the root are the sandbox's own; the home
// (/home/<user>, the default working directory), /tmp and the working
// directory are folders of the state dir, so everything written there
// persists across Stop and Start (an [Config.Ephemeral] sandbox is deleted,
// files and all, when it stops). Commands run as uid 0 of the user
// namespace, with no capabilities at all (empty bounding, permitted,
// effective, inheritable and ambient sets, and no_new_privs; a sandbox
// with a writable root holds [DefaultCapabilities], Docker's set, within
// its own user namespace, and keeps no_new_privs): root inside
// cannot mount, remount the read-only system folders, or regain
// capabilities through setuid or file-capability programs. Every command also runs under a seccomp filter
// modelled on Docker's default profile and, where the kernel has it,
// Landlock scoping (no signals to, nor abstract unix sockets of, processes
// outside the sandbox); the init is not dumpable, so commands cannot
// ptrace it or read its memory, environment or file descriptors.
// [Config.Confinement] holds the explicit opt-outs.
//
// Limits are on by default ([Config.Resources]; Info's Limits and
// Instructions say what is in force). As root, each sandbox gets its own
// cgroups (v1 or v2) with a CPU quota and weight, a memory limit and a
// process limit, which hold every process of the sandbox, background and
// daemonised ones included, and make sure Stop and Destroy leave no
// process; commands see them as the root of a cgroup namespace
// (/proc/self/cgroup shows "/"). Commands are born in a cgroup below the
// init's, so a command that runs out of memory or processes is killed or
// refused while the init, which serves the toolbox API, carries on. The
// home, /tmp, the working directory and the toolbox's logs live on a
// sparse ext4 image of the sandbox's own, of a fixed size (ENOSPC beyond
// it), mounted only in the sandbox's mount namespace: nothing of it
// outlives the sandbox's processes. Without root no limit is enforced:
// the zero Resources is then accepted as best effort, and an explicit one
// is an error ([ErrLimitUnavailable]).
//
// # Network
//
// By default a sandbox reaches the public internet and nothing else: not
// the host (its loopback services, its abstract unix sockets, its own
// addresses), not the host's networks or any private, shared or
// link-local range (cloud metadata at 169.254.169.254 included), not other
// sandboxes; DNS works, through the host's resolver; nothing reaches the
// sandbox but the ports published with [Sandbox.PublishPort] (on the host's
// loopback). As root, the host makes the sandbox's network namespace
// (owned by the host's user namespace: the sandbox's root cannot change
// its interfaces, routes or firewall), links it to the host with a veth
// pair (agentbox<n> on the host, eth0 inside, 10.231.0.0/16 and
// fd61:6762:6f78::/48) and gives it an nftables table of its own
// (inet agentbox-<n>), written through netlink, not with ip or nft; IPv4
// is forwarded and masqueraded, IPv6 only where the host forwards IPv6
// already. Refusals answer at once (a TCP reset, an ICMP
// administratively-prohibited error) and are counted (Info:
// Network.RefusedPackets). What this changes on the host, and when it is
// undone, is in package internal/uplink. Without root the public and
// allowList modes are a user-mode network: a TUN device in the namespace
// the init made, served by a host process of the sandbox with gVisor's
// userspace TCP/IP stack, which relays TCP and UDP over IPv4 (not ICMP,
// not IPv6) from the host as the user, refusing what root's firewall
// refuses (docs/security.md, "The default network without root"). It
// needs a /dev/net/tun the user may open (mode 0666, as most systems
// have it); otherwise Start says so: use the blocked mode or an allow
// list of names alone, which need neither.
//
// [Config.Network] is a [sandbox.NetworkPolicy], the type and validator
// every engine shares: its blocked mode leaves loopback only; its
// allowList mode with Allow (CIDRs) allows the listed ranges only, and no
// DNS query leaves; with Domains alone it gives loopback only and the listed names
// through an egress proxy on the host (http://127.0.0.1:3128 and
// socks5h://127.0.0.1:3128 inside, named by HTTP_PROXY, HTTPS_PROXY and
// ALL_PROXY): one process per state dir, "agentbox-netproxy", this program
// re-executed outside the sandboxes' namespaces (as nobody when started by
// root), serves every sandbox of the state dir that has a list, each with
// its own policy and log; it starts with the first such sandbox, exits
// with the last, and is started again by the next command or Info of a
// sandbox it served if it died. The proxy resolves
// names itself and refuses other names, IP addresses, names that lead to
// non-public addresses, and spoofed Host headers or TLS server names;
// Info shows its last refusals (Network.PolicyLog). With both lists, the
// ranges are reachable directly and the names through the proxy.
// [Sandbox.UpdateNetworkSettings] (of a handle from [New] or [Open])
// changes the policy of a running sandbox at once and records it.
//
// [Options] says which sandbox a handle is for (ID, StateDir) and holds the
// handle's own settings (Env, Timeout, Hooks); its embedded [Config] shapes
// the sandbox when it is created, is stored with it, and is what every
// later handle of that sandbox gets: a later handle leaves Config's fields
// unset, or sets them to the sandbox's values; any other value makes Start
// fail with a [*ConfigMismatchError] rather than be ignored.
//
// Local sandboxes need Linux: elsewhere the package builds, and [New]
// fails with an error matching [sandbox.ErrIsolationUnavailable].
//
// Start reports [sandbox.OutcomeCreated] only for a sandbox new to the
// state dir; finding one by id, running or stopped (and then restarted
// with its files), is [sandbox.OutcomeConnected], as Mastra reports for a
// Daytona sandbox it finds.
//
// Some options differ from Daytona's wire values: [Config.AutoStopInterval]
// 0 means the default of 15 minutes and a negative value never (Daytona: 0
// is never); [Config.AutoDeleteInterval] 0 (or negative) means never
// (Daytona: -1 is never and 0 deletes at once). No process watches a
// stopped sandbox: one past its AutoDeleteInterval, or a stopped
// ephemeral one, is deleted when a host process next looks at the state
// dir (Start of that id, [List], [Open]).
//
// State lives under a state dir (see [DefaultStateDir]):
//
//	<StateDir>/sandboxes/<id>/   meta.json, toolbox.sock, home/, tmp/, workdir/, toolbox/,
//	                             egress-log.json (DomainAllowList)
//	                             (with a disk limit, all but toolbox/ on disk.img)
//	<StateDir>/templates/        formatted disk images that new ones copy
//	<StateDir>/hostroot/<sum>/   base layers of roots made of the host's folders, one per
//	                             state of the host's /etc; once /etc changes, those no
//	                             sandbox records go (as root)
//	<StateDir>/volumes/<name>/   named volumes, shareable between sandboxes
//	<StateDir>/hostids.json      the host uid ranges of the sandboxes (as root)
//	<StateDir>/egress-proxy.sock the shared egress proxy's control socket, and its lock
//
// Whoever can write into the state dir can swap a sandbox's socket, so it
// must be private to its user: every function refuses one owned by another
// user, or writable by group or others ([CheckStateDir],
// [ErrUnsafeStateDir]), and the engine makes the folders it creates, the
// sandbox folders and their homes mode 0700. [DefaultStateDir] never falls
// back to a folder users share.
//
// [List] describes the sandboxes of a state dir, from any process, and
// [Open] returns the handle of one of them by id, without starting it: its
// methods are every operation on that sandbox (Info, Stop, Destroy,
// UpdateNetworkSettings, UpdateResources, PublishPort, DialToolbox, ...).
//
// # Pause
//
// [Sandbox.Pause] (as root: it needs the sandbox's cgroups) freezes every
// process of a running sandbox, its init included, in the cgroup freezer
// (v1's freezer controller, v2's cgroup.freeze): what survives is
// everything the processes hold, their memory, sockets (a connection
// stays open; the peer sees no answer until the resume) and open files,
// and while paused they use no CPU. Its status is "paused" for every
// process ([List], Info, [Open], agentbox sandbox ls). The next command,
// request to its toolbox API (Client, Processes, DialToolbox) or Start,
// or [Sandbox.Resume], lets them run on where they were; Stop and
// Destroy of a paused sandbox work as on a running one. Timers of the
// sandbox's own processes see the paused time as elapsed (a sleep ends
// at once if its time passed meanwhile). The init's auto-stop timer is
// frozen too, so host processes apply it: a paused sandbox idle (no
// toolbox request) for longer than its AutoStopInterval is stopped by
// the next List, Open, command or Resume that finds it, as its init
// would have stopped it (an ephemeral one is then deleted, another by
// its AutoDeleteInterval later), and Resume then fails with an error
// matching [sandbox.ErrInvalidState]; set AutoStopInterval negative to
// keep a paused sandbox's memory indefinitely. What does not survive is
// a restart of the host (the processes are gone; the files stay, and the
// next start boots the sandbox afresh). Pause of a stopped sandbox fails
// with [sandbox.ErrInvalidState]; without a freezer (not root, or a
// sandbox started by a version without one: restart it) with
// [sandbox.ErrUnsupported].
//
// A [Pool] keeps inits started ahead of time, each in its namespaces with
// its uid range and network link made, waiting for a configuration: a new
// sandbox created through it ([Options].Pool)
// takes one and skips the slowest half of a start.
package local

// Where things live (files ending in _linux.go build on Linux only):
//
//	options.go          Options (per handle) and Config (create-time, persisted), validation
//	mismatch.go         a Config that differs from an existing sandbox's: ConfigMismatchError
//	statedir.go         DefaultStateDir and the state dir's safety checks (CheckStateDir)
//	sandbox.go          the Sandbox handle: New, start/stop/destroy (driver), Info, Instructions
//	client.go           the toolbox client of a sandbox's socket
//	layout.go           names of the state dir's files and folders
//	meta.go             meta.json: the persisted metadata (and its previous format), Info's fields
//	state.go            locking a sandbox's folder; List, Open; stop and remove by id
//	platform.go         the Linux check; other.go: stubs for other systems
//	reexec.go           Init, the re-execution entry point
//	launch_linux.go     host side of a start: fork the init in new namespaces, wait until it serves
//	prepare_linux.go    host side: the sandbox's folders, toolbox socket and bind sources
//	control_linux.go    the host↔init control socket: initConfig, its sending and receiving
//	hostids.go          the state dir's pool of host uid ranges: its file, lock, keys and seed
//	pool.go             Pool: spare inits started ahead of time; pool_linux.go: starting,
//	                    adopting and ending one
//	userns_linux.go     user namespace: uid mapping, its owner, availability checks
//	volume_linux.go     who owns the bound folders on the host; volumes' ID-mapped mounts
//	init_linux.go       the init: its named setup steps, then PID 1 (toolbox server, signals, idle stop)
//	rootfs_linux.go     the init's root file system steps (tmpfs root, binds, /proc, /dev, pivot_root)
//	inroot_linux.go     opening and making a sandbox's paths inside its root (openat2
//	                    RESOLVE_IN_ROOT, mkdirat), never through what it planted
//	network.go          the network modes of Config.Network, local's checks of them,
//	                    Instructions
//	netapi.go           the methods UpdateNetworkSettings, PublishPort, UnpublishPort (recorded in meta.json)
//	network_linux.go    the network at a start (host side: namespace, link, firewall; init side:
//	                    loopback, resolv.conf), live changes, teardown, Info's network state
//	netns_linux.go      the namespace of a running init; local's names of internal/netns
//	ports_linux.go      published ports: checking a host port is free
//	domainproxy.go      DomainAllowList: validation, proxy variables, Info's policy log
//	domainproxy_linux.go  DomainAllowList: the listening sockets (made and kept by the init, or
//	                    made by the host), the policy log recorder, watching an init's end
//	egressd_linux.go    the state dir's shared egress proxy process: its control requests
//	                    (serve, allow, drop, status), one egress.Proxy per sandbox, its exit
//	egressclient_linux.go  an engine's side: starting the shared proxy, handing it sandboxes
//	                    (sockets taken from their inits), live changes, healing
//	activity_linux.go   activity stamps (LastUsedAt) and idleness
//	pause.go            Pause and Resume (the cgroup freezer), resuming before each use,
//	                    the host-side auto-stop of paused sandboxes; freezeSandbox
//	reaper_linux.go     the init's orphan reaper
//	proc_linux.go       /proc/<pid>/stat, and ending an init through a pidfd
//	sockpath_linux.go   unix socket paths longer than an address holds
//	confine.go          Confinement as Info and Instructions tell it
//	confine_linux.go    the command thread's named setup steps (its cgroups, Landlock scoping,
//	                    system call filter); the init's own hardening (not dumpable, /proc/keys hidden)
//	fuse_linux.go       Confinement.AllowFUSE: the sandbox's /dev/fuse and its forbidden folders
//	cgroup.go           cgroupSet (recorded in meta.json); cgroup_linux.go: which limits the
//	                    host's cgroups enforce, creating a sandbox's, sweeping orphans
//	resources.go        Resources (the create-time option), its validation, the limits a
//	                    sandbox gets and how Info and Instructions tell them
//	resources_linux.go  what the host offers (cores, memory, cgroups, disk), defaults, bounds
//	limits_linux.go     applying the limits at each start (host side) and the init's side of
//	                    them (joining the commands' cgroups, detached mounts of the host's stamp files)
//	diskimage_linux.go  a sandbox folder's disk image: the state dir's templates, mounting, release
//
// The OS mechanics live in internal packages, each with its own tests:
//
//	internal/cgroup     cgroup v1 and v2 sets: creation, limit files, joining, removal, usage,
//	                    the freezer
//	internal/seccomp    the commands' system call filter: its profile, BPF program, loading
//	internal/landlock   the commands' Landlock scoping (abstract unix sockets, signals)
//	internal/fuse       the init's supervisor doing the FUSE mount(2) and umount2 the filter hands it
//	internal/disk       ext4 disk images: templates, sparse copy, loop device, detached mount
//	internal/netns      throwaway threads that enter or make network namespaces
//	internal/netfilter  the nftables table of a sandbox (policy, DNS forwarding, NAT, ports),
//	                    the links' address plan and the ranges no sandbox reaches
//	internal/uplink     the host's side: links (veth), forwarding, cleanup when the last goes
//	internal/hostids    the pool of host uid ranges: allocation, reservation, reuse, /etc/subuid
//
// and, at the module root, internal/mountinfo (the mount table) and
// internal/cgroupfile (cgroup value files), which toolbox/daemon shares.
