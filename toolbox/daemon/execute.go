package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// oneShotPrefix starts the marker token of a one-shot execution.
const oneShotPrefix = "exec-"

// oneShot is a running POST /process/execute.
type oneShot struct {
	token string
	mu    sync.Mutex
	pgid  int
}

// kill ends the execution's process tree.
func (o *oneShot) kill() {
	o.mu.Lock()
	pg := o.pgid
	o.mu.Unlock()
	var pgids []int
	if pg > 0 {
		pgids = []int{pg}
	}
	killTree(pgids, o.token)
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.ExecuteRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	cwd, env, err := s.executeSettings(req)
	if err != nil {
		return err
	}
	res, err := s.runTimed(r, req.Command, cwd, env, req.Timeout, "command execution")
	if err != nil || res == nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// runTimed runs command as a one-shot execution for request r, killed
// after timeout seconds (0: none). A timeout is a 408 error saying what
// timed out; a nil answer without error means the client went away and
// nobody reads the answer.
func (s *Server) runTimed(r *http.Request, command, cwd string, env []string, timeout int, what string) (*toolbox.ExecuteResponse, error) {
	o := &oneShot{token: oneShotPrefix + randomHex(8)}
	env = append(env, markerKey+"="+o.token)
	ctx := r.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeout)*time.Second)
		defer cancel()
	}
	if err := s.addOneShot(o); err != nil {
		return nil, err
	}
	defer s.removeOneShot(o)
	res, err := s.runOneShot(ctx, o, command, cwd, env)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil {
			return nil, errorf(http.StatusRequestTimeout, codeRequestTimeout, "%s timeout after %d seconds", what, timeout)
		}
		return nil, nil
	}
	return &res, nil
}

// executeSettings checks an execute request and returns the command's
// working directory and environment.
func (s *Server) executeSettings(req toolbox.ExecuteRequest) (cwd string, env []string, err error) {
	if err := checkCommand(req.Command); err != nil {
		return "", nil, err
	}
	if req.Timeout < 0 {
		return "", nil, badRequest("timeout must be >= 0 seconds, got %d", req.Timeout)
	}
	cwd = s.workDir
	if req.Cwd != "" {
		if cwd, err = s.resolve(req.Cwd); err != nil {
			return "", nil, err
		}
		// A cwd through a /proc magic link is refused; a missing one
		// fails the command's start, as with Daytona's daemon.
		if _, err := s.root.stat(cwd); errors.Is(err, errMagicLink) || errors.Is(err, errNoOpenat2) {
			return "", nil, cwdError(cwd, err)
		}
	}
	env, err = s.commandEnv(req.Envs)
	if err != nil {
		return "", nil, err
	}
	return cwd, env, nil
}

// commandEnv returns the base environment with envs set, or a 400 error
// naming the first variable (in sorted order) that a shell cannot export.
func (s *Server) commandEnv(envs map[string]string) ([]string, error) {
	env := withoutKeys(s.environ(), markerKey)
	// Check in sorted order, so that the error names the same variable
	// every time.
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		v := envs[k]
		if !sandbox.ValidEnvName(k) {
			return nil, badRequest("invalid environment variable name %q: names must match [A-Za-z_][A-Za-z0-9_]* (a name a shell can export)", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, badRequest("invalid value of environment variable %q: values must not contain NUL", k)
		}
		env = append(withoutKeys(env, k), k+"="+v)
	}
	return env, nil
}

// addOneShot registers o, so that Close kills it.
func (s *Server) addOneShot(o *oneShot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.execs[o] = struct{}{}
	return nil
}

func (s *Server) removeOneShot(o *oneShot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.execs, o)
}

// runOneShot runs command to its end, or until ctx is done: then it kills
// the command's process tree. The answer holds stdout and stderr merged.
func (s *Server) runOneShot(ctx context.Context, o *oneShot, command, cwd string, env []string) (toolbox.ExecuteResponse, error) {
	args, cleanup, err := s.shellArgs(command, s.tmpDir, o.token)
	if err != nil {
		return toolbox.ExecuteResponse{}, err
	}
	defer cleanup()

	// stdout and stderr share one pipe. We keep a copy of its write end:
	// after the shell exits, a sentinel written through it marks the end of
	// the shell's output even when background children keep the pipe open.
	pr, pw, err := os.Pipe()
	if err != nil {
		return toolbox.ExecuteResponse{}, err
	}
	defer pr.Close()
	growPipe(pw)
	cmd := &exec.Cmd{
		Path:        s.shell,
		Args:        args,
		Env:         env,
		Dir:         cwd,
		Stdout:      pw,
		Stderr:      pw,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := s.startCommand(cmd); err != nil {
		pw.Close()
		return toolbox.ExecuteResponse{ExitCode: exitNotStarted, Result: err.Error()}, nil
	}
	o.mu.Lock()
	o.pgid = cmd.Process.Pid
	o.mu.Unlock()
	sentinel := []byte(randomHex(16))
	outCh := make(chan []byte, 1)
	go func() { outCh <- readUntil(pr, sentinel) }()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		o.kill()
		werr = <-waited
	}
	writeSentinel(pw, sentinel)
	out := <-outCh
	return toolbox.ExecuteResponse{ExitCode: exitCode(cmd, werr), Result: string(out)}, nil
}

// readUntil reads r until the sentinel (left out) or EOF.
func readUntil(r io.Reader, sentinel []byte) []byte {
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if i := bytes.Index(out[max(0, len(out)-n-len(sentinel)):], sentinel); i >= 0 {
			return out[:max(0, len(out)-n-len(sentinel))+i]
		}
		if err != nil {
			return out
		}
	}
}

// checkCommand rejects a command that is blank or holds a NUL byte, which
// no shell can run.
func checkCommand(command string) error {
	if strings.TrimSpace(command) == "" {
		return badRequest("command is required")
	}
	if strings.IndexByte(command, 0) >= 0 {
		return badRequest("command contains a NUL byte")
	}
	return nil
}
