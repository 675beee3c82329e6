// Package daemon implements a server of the Daytona toolbox API: the agent
// that runs inside a sandbox (as PID 1 of a local sandbox, or in-process in
// tests) and executes commands and file operations for a toolbox client.
//
// The server is wire-compatible with Daytona's daemon (the current cloud
// toolbox spec and the v0.190.0 daemon): every Daytona SDK can talk to it.
// It improves on Daytona where the protocol leaves room:
//
//   - Session commands keep the session's working directory, environment,
//     and (with bash) shell variables and functions, yet a command that runs
//     `exit 3` or trips `set -e` does not kill the session. Each command is
//     a fresh shell started in the saved state; an EXIT trap hands the new
//     state back to the server. The shell for the next command is started
//     ahead of time, so a command costs about as much as os/exec of
//     `sh -c`. Shell options (`set -e`, `shopt`) and aliases do not carry
//     over. Every process a command starts carries the environment variable
//     AGENTBOX_SESSION_CMD, by which the server finds it when the session
//     is deleted.
//   - Output reaches log followers the moment it is read, partial lines
//     included, with no polling; the follow WebSocket closes as soon as the
//     command has ended and everything was sent.
//   - Logs spill to files under the process's temporary directory
//     ($TMPDIR), so a command may print far more than fits in memory. Logs
//     are kept until their session is deleted, as in Daytona (except those
//     of stateless commands, below).
//   - Deleting a session kills every process its commands started, daemons
//     that called setsid included.
//
// It also offers the agentbox protocol extensions, announced on every
// response by the X-Agentbox-Extensions header ("frames,stdin,base64,
// stateless,binary,tether") and used only when a client asks for them with
// X-Agentbox-Use:
//
//   - frames (log follow WebSocket): binary messages of one stream id byte
//     and raw payload, up to 256 KiB each (32 KiB without frames, the
//     default read limit of common WebSocket libraries); the close reason
//     carries "exit=<code>" or "killed".
//   - stdin (POST …/input): data is written exactly, without echo or an
//     appended newline; X-Agentbox-Stdin-Close: true closes the command's
//     stdin afterwards; X-Agentbox-Stdin-Encoding: base64 says data is
//     standard base64 of raw bytes, so any bytes can be sent.
//   - base64 (sync session exec, GET …/logs JSON): stdout and stderr are
//     base64 of the raw bytes, confirmed by X-Agentbox-Encoding: base64.
//   - binary (sync session exec): the answer is the raw output, stdout
//     then stderr, with the command id, exit code and byte counts in
//     X-Agentbox-* headers; X-Agentbox-Tail: n on the request asks for the
//     last n bytes of each stream only. The server streams the answer from
//     the command's log through a fixed buffer, so its memory does not grow
//     with the output, and the output crosses the connection once (the
//     JSON answer carries it twice, and escapes every NUL as six bytes).
//   - tether (session exec): the command dies with its client. A sync
//     exec's command is killed when its request goes away unanswered; an
//     async exec's command once, for toolbox.TetherGrace, no log follower
//     has been connected and no request about it has come.
//   - stateless (session exec): the command runs in a fresh shell of the
//     session's current state, but no EXIT trap saves the state it leaves:
//     its cd, exports and variables are gone for the next command. That
//     saves the state round trip; clients that isolate every command
//     anyway (package toolbox/process) drop their own subshell with it.
//     The server also drops the command's log (memory and spill file) once
//     its output was delivered: for a sync exec once the response was
//     written; for an async exec once a frames follower has received
//     everything and answered the server's "exit=<code>" close with its
//     own close (as coder/websocket does). A follower that leaves early,
//     one without frames, or polling GET …/logs delivers nothing in this
//     sense: the log is then kept until the session is deleted, as usual,
//     and a later frames follower that completes frees it. After the drop
//     GET …/command/{id} still reports the exit code, GET …/logs answers
//     an empty log, a new follower gets no output and the "exit=<code>"
//     close, and output of the command's background jobs is discarded. A
//     drop waits for followers still reading the log.
//
// Options.Daytona turns on a Daytona-behaviour mode, for tests: no
// extensions, and the quirks of Daytona's own daemon that a client can
// observe (a follow socket that lingers a second after the command ended,
// NUL bytes dropped and last lines ended, input refused until the
// command's pipe exists, a 500 for an exec in an unknown session, a
// session killed by a raw `exit`). See daytona.go and docs/protocol.md.
//
// Computer use (/computeruse/...) and LSP (/lsp/...) are not implemented:
// their requests are answered 501 in Daytona's error shape.
//
// Input sent to a command that no longer reads it (the write fails with
// EPIPE) is answered 410 GONE, like input to a command that has ended;
// 408 is left for input that a live command does not read within 10 s.
//
// # Paths
//
// Every path a request names (file endpoints, a command's, PTY's or
// interpreter context's cwd, a git repository, a clone target, a local
// remote URL, a git config file) is resolved by the server inside
// Options.Root ("/" by default: inside a sandbox, the sandbox's own root),
// never as a path string on the server's file system. A relative path is
// taken from Options.WorkDir; a relative path whose cleaned form climbs
// out of the work dir ("../x", "a/../../x") is rejected with 400
// BAD_REQUEST, and so is a path containing a NUL byte. Absolute paths are
// allowed and name the root's files: "/a/b" is the root's a/b. Symbolic
// links, absolute ones and ".." included, are followed inside the root as
// a chroot would: an absolute link target and a ".." at the top resolve
// from the root, so no link a sandbox plants leads outside it. The magic
// links of /proc (/proc/<pid>/fd/N, /proc/<pid>/root, /proc/<pid>/cwd,
// /proc/self/... and /proc/thread-self/...) are not followed: a path
// through one, or through a loop of links, is rejected with 400
// BAD_REQUEST. Resolution uses openat2 with RESOLVE_IN_ROOT and
// RESOLVE_NO_MAGICLINKS (Linux 5.6); on a kernel without openat2 every
// path is answered with 501 rather than resolved unsafely. Operations on
// a last name (delete, move, making folders, listing, walks of find and
// search, recursive deletes) go by descriptor and never follow a link met
// below the path named. go-git takes path strings: it is handed the
// kernel's name of the repository folder resolved inside the root; what
// it then reads below that folder is not re-resolved per file.
//
// Within the root, a path reaches whatever the server's user (or the user
// commands run as) can, as with Daytona's daemon: the work dir is a
// default, not a boundary. Isolation from the host comes from the engine
// that runs the server (the sandbox's namespaces, mounts and user); a
// server run outside a sandbox with the root "/" exposes its user's whole
// file system to its clients.
//
// DELETE /files refuses, with 400 BAD_REQUEST, to delete / and the work
// dir itself (under any name, "." included) or a directory holding it,
// recursive or not: delete the entries inside instead.
//
// POST /process/execute refuses, with 400 BAD_REQUEST, environment
// variable names that a shell cannot export (anything but
// [A-Za-z_][A-Za-z0-9_]*, see sandbox.ValidEnvName) and values holding a
// NUL byte; the message names the variable.
//
// The Server is an http.Handler; listening (on a unix socket or TCP) is the
// caller's job.
package daemon
