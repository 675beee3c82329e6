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

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	var req toolbox.ExecuteRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkCommand(req.Command); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Timeout < 0 {
		s.writeError(w, r, badRequest("timeout must be >= 0 seconds, got %d", req.Timeout))
		return
	}
	cwd := s.workDir
	if req.Cwd != "" {
		p, err := s.resolve(req.Cwd)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		cwd = p
	}
	env := withoutKeys(s.baseEnv, markerKey)
	// Check in sorted order, so that the error names the same variable
	// every time.
	for _, k := range slices.Sorted(maps.Keys(req.Envs)) {
		v := req.Envs[k]
		if !sandbox.ValidEnvName(k) {
			s.writeError(w, r, badRequest("invalid environment variable name %q: names must match [A-Za-z_][A-Za-z0-9_]* (a name a shell can export)", k))
			return
		}
		if strings.ContainsRune(v, 0) {
			s.writeError(w, r, badRequest("invalid value of environment variable %q: values must not contain NUL", k))
			return
		}
		env = append(withoutKeys(env, k), k+"="+v)
	}
	o := &oneShot{token: "exec-" + randomHex(8)}
	env = append(env, markerKey+"="+o.token)

	ctx := r.Context()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Second)
		defer cancel()
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeInternal, "the toolbox server is shutting down"))
		return
	}
	s.execs[o] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.execs, o)
		s.mu.Unlock()
	}()

	args, cleanup, err := s.shellArgs(req.Command, s.tmpDir, o.token)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer cleanup()

	// stdout and stderr share one pipe. We keep a copy of its write end:
	// after the shell exits, a sentinel written through it marks the end of
	// the shell's output even when background children keep the pipe open.
	pr, pw, err := os.Pipe()
	if err != nil {
		s.writeError(w, r, err)
		return
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
	if err := s.starter.start(cmd); err != nil {
		pw.Close()
		writeJSON(w, http.StatusOK, toolbox.ExecuteResponse{ExitCode: -1, Result: err.Error()})
		return
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
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil {
			s.writeError(w, r, errorf(http.StatusRequestTimeout, codeRequestTimeout, "command execution timeout after %d seconds", req.Timeout))
			return
		}
		// The client went away: nobody reads the answer.
		return
	}
	writeJSON(w, http.StatusOK, toolbox.ExecuteResponse{ExitCode: exitCode(cmd, werr), Result: string(out)})
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
