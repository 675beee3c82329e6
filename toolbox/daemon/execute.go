package daemon

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

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
	if strings.TrimSpace(req.Command) == "" {
		s.writeError(w, r, badRequest("command is required"))
		return
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		s.writeError(w, r, badRequest("command contains a NUL byte"))
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
	for k, v := range req.Envs {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			s.writeError(w, r, badRequest("invalid environment variable %q: names must be non-empty without '=' or NUL, values without NUL", k))
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

	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, s.shell)
	cmd.Args = args
	cmd.Env = env
	cmd.Dir = cwd
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		o.kill()
		return nil
	}
	// Background children may keep the output pipe open.
	cmd.WaitDelay = 100 * time.Millisecond
	if err := cmd.Start(); err != nil {
		writeJSON(w, http.StatusOK, toolbox.ExecuteResponse{ExitCode: -1, Result: err.Error()})
		return
	}
	o.mu.Lock()
	o.pgid = cmd.Process.Pid
	o.mu.Unlock()
	werr := cmd.Wait()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil {
			s.writeError(w, r, errorf(http.StatusRequestTimeout, codeRequestTimeout, "command execution timeout after %d seconds", req.Timeout))
			return
		}
		// The client went away: nobody reads the answer.
		return
	}
	writeJSON(w, http.StatusOK, toolbox.ExecuteResponse{ExitCode: exitCode(cmd, werr), Result: out.String()})
}
