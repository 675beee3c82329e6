// Package process runs commands and background processes in a sandbox
// through its toolbox API. It is written once for every engine: a
// [Manager] drives a [toolbox.Client], so the same code serves a local
// sandbox (agentbox's own toolbox server) and a Daytona cloud sandbox.
//
// # Sessions
//
// Commands run in toolbox sessions, each a long-lived shell. The Manager
// keeps a small pool of idle sessions and wraps every command so that
// nothing it does (cd, export, set, exit, a syntax error) leaks into or
// kills the pooled shell:
//
//	(export K='v' && cd '/dir' && eval '<command>') </dev/null
//
// The command is quoted with [sandbox.ShellQuote] and run by eval, so
// heredocs, trailing comments and several lines work as typed, and a
// syntax error fails the command (exit 2) instead of the session shell.
//
// Against agentbox's own toolbox server (which offers the "stateless"
// extension) the server guarantees that isolation: it runs every session
// command in a fresh shell of its own, through eval. There the command is
// sent stateless, without the subshell (a fork less) and without eval,
// after the setup on the same line:
//
//	export K='v' && cd '/dir' || exit; exec </dev/null; <command>
//
// so that the shell numbers the command's lines as `bash -c '<command>'`
// does: its error messages and $LINENO read the same (bash numbers the
// lines of a quoted eval argument from the line where the eval command
// ends, which showed the wrapper through in multi-line commands).
//
// # Round trips
//
// A command that streams nothing (no Stdout, Stderr or Stdin in its
// options) costs one request on a warm pool: a synchronous session exec.
// A streaming command costs an asynchronous exec plus one log follow
// against agentbox's server, whose "frames" follow ends with the exit code.
// Against a server without frames (a plain Daytona daemon, whose follow
// socket tells no exit code and lingers a second after the end) the command
// notes its exit code in a variable of the session shell, and a "waiter", a
// synchronous exec sent right after it, prints it: the session runs its
// commands one at a time, so the waiter is answered as soon as the command
// has ended. The follow then never polls the command: a command whose
// waiter answers within one round trip plus toolbox.DefaultExitGrace costs
// 3 requests (exec, waiter, its whole log), a longer one 4 however long it
// runs (exec, waiter, the socket, one
// read of the log's rest). A session found gone (the sandbox restarted) is
// replaced and the command retried once.
//
// A plain Daytona server keeps every command's log until its session is
// deleted, so a pooled session is retired after 64 commands, or once its
// commands printed 64 MiB. A server with the "stateless" extension drops a
// stateless command's log once the output was delivered (the sync answer,
// or a frames follow whose close the client answered); there a pooled
// session is retired only after 4096 commands, which bounds the server's
// list of commands, and output counts towards the 64 MiB only when its
// delivery was not confirmed (a follow that fell back to polling). A
// retired session is replaced in the background: a new session joins the
// pool and the old one is deleted, off the path of any command.
//
// The exit code of a streamed command comes from the frames extension's
// close reason, else from the waiter, else from GET …/command/{id}; a
// server that has not recorded it yet is asked again for up to 3 seconds
// before the command fails with an error (Mastra instead assumes 0; a wrong "success" is worse
// than an error).
//
// # Background processes
//
// A background process (Spawn) lives in a session of its own, named
// SessionPrefix+"bg-"+id ("agentbox-bg-1", "agentbox-bg-2", …), as that
// session's first command. The session is the process's record on the
// server: its command line, its exit code once it exits and its whole log,
// kept for every reader (a background command never runs stateless). So
// any Manager of the sandbox, in any operating-system process, lists the
// processes (List), reattaches to them (Get, Attach), reads and follows
// their output, writes to their stdin and kills them (by deleting the
// session, as for any command). The command line is read back from the
// session's command, which is the wrapped form shown above.
//
// Ids are allocated by creating sessions: Spawn lists the sessions and
// creates the one above the highest id, and when a concurrent spawn
// created it first (409 Conflict, or the session exists), tries the next
// id. A spawn costs four requests (list, create, async exec, one log
// follow; one more for the exit code against a plain Daytona daemon).
//
// The session is deleted when the sandbox forgets the process: Kill, Get
// after the process exited, or Close of the Manager that spawned it.
// Detach leaves it, and the process running. The server keeps the log of
// a background process until then.
//
// # Timeouts and cancellation
//
// Timeouts are enforced by the client: when one expires, or the caller's
// context is cancelled, the command's session is deleted, which makes the
// server kill the command's whole process tree. Such a session never
// returns to the pool.
//
// A command of Execute dies with the process that runs it even when that
// process gets no chance to clean up (SIGKILL): against a server with the
// agentbox "tether" extension every Execute asks for it, and the server
// kills a command whose sync request went away, or whose follower has been
// gone for toolbox.TetherGrace. Background processes (Spawn) are not
// tethered: they outlive their Manager by design (Detach). A plain Daytona
// daemon has no such thing: there a command of a killed client runs on.
package process
