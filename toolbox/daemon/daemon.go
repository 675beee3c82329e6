package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/goroutine"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// DefaultVersion is what GET /version reports when Options.Version is empty.
const DefaultVersion = "v0.0.0-agentbox"

// DefaultMaxBodyBytes is the default cap on request bodies (uploads excepted).
const DefaultMaxBodyBytes = 10 << 20

// offeredExtensions lists the agentbox protocol extensions this server
// offers, as sent in the X-Agentbox-Extensions header of every response.
const offeredExtensions = toolbox.ExtFrames + "," + toolbox.ExtStdin + "," + toolbox.ExtBase64 + "," + toolbox.ExtStateless + "," + toolbox.ExtBinary + "," + toolbox.ExtTether + "," + toolbox.ExtPtyCommand

// Options configures a Server. The zero value is usable: commands run in the
// process's working directory with its environment.
type Options struct {
	// WorkDir is the default working directory of commands and the base of
	// relative file paths (GET /work-dir). Default: the process's cwd.
	WorkDir string
	// HomeDir is reported by GET /user-home-dir. Default: WorkDir.
	HomeDir string
	// Shell runs commands. Default: the first of bash and sh found in PATH.
	Shell string
	// Env is the base environment of commands ("K=V"). Default: os.Environ().
	Env []string
	// Version is reported by GET /version. Default: DefaultVersion.
	Version string
	// MaxBodyBytes caps request bodies except file uploads. Default:
	// DefaultMaxBodyBytes. Larger bodies are answered with 413.
	MaxBodyBytes int64
	// Logger receives internal errors. Default: none.
	Logger *slog.Logger
	// DropCapabilities starts every command with empty capability sets
	// (bounding, permitted, effective, inheritable, ambient) and
	// no_new_privs, even when the server runs as root: a sandbox's init
	// sets it so that root inside the sandbox cannot mount, remount or
	// otherwise use the capabilities of its user namespace. New fails if
	// the capabilities cannot be dropped.
	DropCapabilities bool
	// KeepCapabilities lists capabilities (CAP_* numbers) that
	// DropCapabilities leaves in the bounding set of commands, so that a
	// command running as uid 0 holds those and no other. A sandbox's init
	// keeps CAP_SETFCAP when it allows nested user namespaces: the kernel
	// lets a process map its namespace's root into a user namespace it
	// creates only if it held CAP_SETFCAP.
	KeepCapabilities []int
	// StartThreadSetup, when set, runs on the OS thread that starts every
	// command, before capabilities are dropped (with DropCapabilities);
	// namespaces it unshares apply to every command. A sandbox's init uses
	// it to unshare a cgroup namespace rooted at the cgroups it was moved
	// into. New fails if it fails.
	StartThreadSetup func() error
	// Entrypoint is the argv of a command the server starts at once and
	// serves as Daytona's entrypoint session (GET
	// /process/session/entrypoint and its logs); an engine passes an
	// image's entrypoint here. It runs like a session command, in the work
	// dir with Env. Empty: no entrypoint (those routes answer 404).
	Entrypoint []string
	// Credential, when set, is the user (and groups) every command runs
	// as, e.g. an image's USER; the server keeps its own ids. The server
	// then acts as that user on the files it makes or changes for a client
	// (uploads, new folders, moves, git checkouts, its scripts for the
	// commands) with that user's file system ids, so that they are the
	// user's, as with Daytona's daemon, which runs as its sandbox's user.
	// Needs Linux and the capabilities to change ids (CAP_SETUID,
	// CAP_SETGID). Default: commands run as the server.
	Credential *syscall.Credential
	// Daytona turns on the Daytona-behaviour mode, for tests: the server
	// behaves as Daytona's own daemon does where a client can tell, so
	// that a client (and every engine built on one) can be tested against
	// Daytona's quirks without Daytona. It advertises and honours no
	// agentbox extension; a log follow socket closes about a second
	// (daytonaCloseTail) after the command ended instead of at once; a
	// stream's last line without a newline gets one and NUL bytes are
	// dropped from output; input gets a newline appended (as without the
	// stdin extension) and, until daytonaPipeDelay after an async command
	// started, 500 "failed to open input pipe"; an exec in an unknown
	// session gets 500, not 404; a command that ends its shell with a raw
	// `exit N` (or `set -e`) kills the session: it never reports an exit
	// code, and later execs get 500. docs/protocol.md lists these quirks.
	// Off by default.
	Daytona bool
	// DaytonaCloseTail, in the Daytona-behaviour mode, is how long a log
	// follow socket stays open after its command ended with nothing new.
	// Default: about a second, as Daytona's daemon. A test lengthens it to
	// show that a client does not wait for it.
	DaytonaCloseTail time.Duration
	// Cgroups lists the folders of the cgroups whose limits and use GET
	// /system/metrics reports: a cgroup v2 folder, or cgroup v1 folders of
	// the cpu, cpuacct and memory controllers. Default: the server's own
	// cgroups, found through /proc/self/cgroup and the mount table. A
	// server with no cgroup file system mounted (a sandbox's init) names
	// its cgroup here, e.g. as /proc/self/fd/N of a folder it holds open;
	// without cgroups the machine's figures are reported.
	Cgroups []string
	// Root is the folder every path a client names is resolved inside
	// (root.go): "/a" is Root's a, and no symbolic link, ".." or /proc
	// magic link leads out of it. WorkDir and HomeDir are paths inside
	// it. Commands are not confined to it (the engine's sandbox does
	// that); their working directory is resolved inside it. Default: "/",
	// the server's own root (a sandbox's, for its init). Outside Linux
	// only "/" is accepted.
	Root string
}

// Server serves the Daytona toolbox API. Create it with New and release it
// with Close. It is safe for concurrent use.
type Server struct {
	workDir  string
	homeDir  string
	shell    string
	bash     bool
	envMu    sync.Mutex // guards baseEnv, which is replaced, never changed in place
	baseEnv  []string   // read it with environ
	version  string
	maxBody  int64
	log      *slog.Logger
	tmpDir   string
	mux      *http.ServeMux
	cgroups  []string            // Options.Cgroups
	cpu      cpuSampler          // GET /system/metrics's previous sample
	starter  *starter            // nil: commands start directly
	cred     *syscall.Credential // Options.Credential (runas.go)
	argv0    string              // the shell's argv[0]: its base name, as a user's `bash -c` has it
	program  string              // the ready shells' program (see readyShellProgram)
	boot     string              // under bash, their -c argument, which reads the program (bashBootstrap)
	ctx      context.Context     // cancelled by Close
	cancel   context.CancelFunc
	bg       goroutine.Group // every goroutine the server starts
	mu       sync.Mutex
	closed   bool
	sessions map[string]*session
	spare    *spareShell // the first session's shell, until taken (spareshell.go)
	execs    map[*oneShot]struct{}
	logMem   atomic.Int64   // log bytes held in memory
	interp   interpreters   // interpreter contexts (interpreter.go)
	entry    *session       // the entrypoint's session, or nil (entrypoint.go)
	ptys     ptyTable       // PTY sessions (ptysession.go)
	gitCreds gitCredentials // POST /git/credentials, in memory only
	daytona  bool           // the Daytona-behaviour mode (daytona.go)
	tail     time.Duration  // its close tail (Options.DaytonaCloseTail)
	root     *fsRoot        // where paths resolve (Options.Root, root.go)
	// tmpFS resolves the paths of tmpDir, on the server's own file
	// system: the root "/" (s.root when that is the root), so a link the
	// sandbox plants there is followed, but never a /proc magic link.
	tmpFS *fsRoot
}

// New returns a Server configured by opts. It fails when the work dir does
// not exist or no shell is found.
func New(opts Options) (*Server, error) {
	s := &Server{
		workDir:  opts.WorkDir,
		homeDir:  opts.HomeDir,
		shell:    opts.Shell,
		version:  opts.Version,
		maxBody:  opts.MaxBodyBytes,
		log:      opts.Logger,
		daytona:  opts.Daytona,
		tail:     opts.DaytonaCloseTail,
		cgroups:  opts.Cgroups,
		sessions: make(map[string]*session),
		execs:    make(map[*oneShot]struct{}),
	}
	if s.workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("daemon: finding the work dir: %w", err)
		}
		s.workDir = wd
	}
	abs, err := filepath.Abs(s.workDir)
	if err != nil {
		return nil, fmt.Errorf("daemon: work dir %q: %w", s.workDir, err)
	}
	s.workDir = abs
	rootDir := opts.Root
	if rootDir == "" {
		rootDir = "/"
	}
	if s.root, err = openRoot(rootDir); err != nil {
		return nil, err
	}
	s.tmpFS = s.root
	if s.root.dir != "/" {
		if s.tmpFS, err = openRoot("/"); err != nil {
			return nil, err
		}
	}
	if fi, err := s.root.stat(s.workDir); err != nil {
		return nil, fmt.Errorf("daemon: work dir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("daemon: work dir %q is not a directory", s.workDir)
	}
	if s.homeDir == "" {
		s.homeDir = s.workDir
	}
	if s.shell == "" {
		for _, name := range []string{"bash", "sh"} {
			if p, err := exec.LookPath(name); err == nil {
				s.shell = p
				break
			}
		}
		if s.shell == "" {
			return nil, errors.New("daemon: no shell found: install bash or sh, or set Options.Shell")
		}
	} else if p, err := exec.LookPath(s.shell); err != nil {
		return nil, fmt.Errorf("daemon: shell %q: %w", s.shell, err)
	} else {
		s.shell = p
	}
	s.bash = filepath.Base(s.shell) == "bash"
	s.argv0 = filepath.Base(s.shell)
	s.program = readyShellProgram(s.bash)
	s.boot = bashBootstrap(len(s.program))
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	s.baseEnv = withoutKeys(env, markerKey)
	if s.version == "" {
		s.version = DefaultVersion
	}
	if s.tail <= 0 {
		s.tail = daytonaCloseTail
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.starter, err = newStarter(opts.DropCapabilities, opts.KeepCapabilities, opts.StartThreadSetup); err != nil {
		return nil, err
	}
	if opts.Credential != nil {
		c := *opts.Credential
		s.cred = &c
	}
	if s.tmpDir, err = s.makeTmpDir(); err != nil {
		s.starter.close()
		return nil, fmt.Errorf("daemon: creating the log dir: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes()
	if len(opts.Entrypoint) > 0 {
		if err := s.startEntrypoint(opts.Entrypoint); err != nil {
			s.Close()
			return nil, fmt.Errorf("daemon: starting the entrypoint: %w", err)
		}
	}
	s.startSpare()
	return s, nil
}

// A route pairs a ServeMux pattern with its handler.
type route struct {
	pattern string
	h       handlerFunc
}

// routes builds the server's mux from each concern's route table. A new
// concern adds its table here; a new route is one line in its concern's
// table.
func (s *Server) routes() {
	m := http.NewServeMux()
	for _, table := range [][]route{
		s.infoRoutes(),
		s.processRoutes(),
		s.asUserRoutes(s.fileRoutes()),
		s.asUserRoutes(s.codeRunRoutes()),
		s.interpreterRoutes(),
		s.entrypointRoutes(),
		s.ptyRoutes(),
		s.asUserRoutes(s.gitRoutes()),
		s.unsupportedRoutes(),
		s.systemRoutes(),
		{{"/", func(w http.ResponseWriter, r *http.Request) error {
			return notFound("no route for %s %s", r.Method, r.URL.Path)
		}}},
	} {
		for _, rt := range table {
			s.handle(m, rt.pattern, rt.h)
		}
	}
	s.mux = m
}

// infoRoutes serves what the server tells about itself.
func (s *Server) infoRoutes() []route {
	return []route{
		{"GET /version", s.handleVersion},
		{"GET /work-dir", s.handleWorkDir},
		{"GET /user-home-dir", s.handleHomeDir},
		{"GET /project-dir", s.handleHomeDir},
	}
}

// ServeHTTP serves one toolbox API request. Every response carries the
// X-Agentbox-Extensions header; a panic in a handler becomes a 500 answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.daytonaRequest(w, r)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			if s.log != nil {
				s.log.Error("toolbox handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			}
			s.writeError(w, r, errorf(http.StatusInternalServerError, codeInternal, "handler panicked: %v", v))
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// Close deletes every session, killing every process of every session, of
// every PTY session and of running one-shot executions, ends log followers
// and PTY connections (exit code 137), waits for the server's goroutines
// and removes its log files.
//
// Requests in flight get the answers a deleted session gives: a sync
// session exec 404 NOT_FOUND, a log follower a normal close ("killed" with
// the frames extension) or 1001 going away. Requests arriving meanwhile or
// afterwards are answered as by a server without sessions (404 for any
// session or command; files and version as usual), except those that
// would start something new, a session or a one-shot execution: they get
// no answer, their connection is closed, as by a server that has stopped.
// To stop serving, close the listener first, then Close, then let the
// http.Server finish what is in flight (Shutdown).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sessions := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.sessions = map[string]*session{}
	spare := s.takeSpare()
	execs := make([]*oneShot, 0, len(s.execs))
	for e := range s.execs {
		execs = append(execs, e)
	}
	s.mu.Unlock()

	s.cancel()
	var teardown goroutine.Group
	for _, ss := range sessions {
		teardown.Go(ss.destroy)
	}
	for _, e := range execs {
		teardown.Go(e.kill)
	}
	teardown.Go(s.closeInterpreters)
	teardown.Go(s.closeEntrypoint)
	teardown.Go(s.closePtys)
	if spare != nil {
		teardown.Go(spare.dismiss)
	}
	_ = teardown.Wait(context.Background())
	_ = s.bg.Wait(context.Background())
	s.starter.close()
	return s.tmpFS.removeAll(s.tmpDir)
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, toolbox.VersionResponse{Version: s.version})
	return nil
}

func (s *Server) handleWorkDir(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, toolbox.DirResponse{Dir: s.workDir})
	return nil
}

func (s *Server) handleHomeDir(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, toolbox.DirResponse{Dir: s.homeDir})
	return nil
}

// withoutKeys returns env without the entries of the given keys.
func withoutKeys(env []string, keys ...string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, key := range keys {
			if k == key {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
