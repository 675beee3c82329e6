package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// The interpreter: stateful Python contexts (/process/interpreter/*). Each
// context is a Python process (interpreter_worker.py) holding one
// namespace; executions run in it one at a time, over the WebSocket of
// GET /process/interpreter/execute (interpreter_exec.go).

// defaultContextID names the context used when an execution names none.
// It is not listed and cannot be deleted.
const defaultContextID = "default"

// interpreters holds a server's interpreter contexts. The zero value is
// ready to use.
type interpreters struct {
	mu        sync.Mutex
	ctxs      map[string]*interpContext
	closed    bool
	script    string // the worker program's path, once written
	scriptErr error
	once      sync.Once
}

// interpContext is one interpreter context.
type interpContext struct {
	id      string
	cwd     string
	created time.Time
	turn    chan struct{} // one token: the right to execute

	mu      sync.Mutex
	w       *worker // nil until started, and after it died
	deleted bool
}

func (s *Server) interpreterRoutes() []route {
	return []route{
		{"POST /process/interpreter/context", s.handleCreateContext},
		{"GET /process/interpreter/context", s.handleListContexts},
		{"DELETE /process/interpreter/context/{id}", s.handleDeleteContext},
		{"GET /process/interpreter/execute", s.handleInterpreterExecute},
	}
}

func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.CreateContextRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if lang := strings.ToLower(strings.TrimSpace(req.Language)); lang != "" && lang != toolbox.LanguagePython {
		return badRequest("unsupported language: %s (the interpreter runs python; run %s and %s with /process/code-run)",
			req.Language, toolbox.LanguageJavaScript, toolbox.LanguageTypeScript)
	}
	cwd := s.workDir
	if req.Cwd != "" {
		var err error
		if cwd, err = s.resolve(req.Cwd); err != nil {
			return err
		}
	}
	if err := s.checkCwd(cwd); err != nil {
		return err
	}
	ic, err := s.newContext(newUUID(), cwd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ic.info())
	return nil
}

func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) error {
	s.interp.mu.Lock()
	list := make([]*interpContext, 0, len(s.interp.ctxs))
	for id, ic := range s.interp.ctxs {
		if id != defaultContextID {
			list = append(list, ic)
		}
	}
	s.interp.mu.Unlock()
	slices.SortFunc(list, func(a, b *interpContext) int { return a.created.Compare(b.created) })
	out := toolbox.ListContextsResponse{Contexts: make([]toolbox.InterpreterContext, 0, len(list))}
	for _, ic := range list {
		out.Contexts = append(out.Contexts, ic.info())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleDeleteContext(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if id == defaultContextID {
		return badRequest("the default context cannot be deleted")
	}
	s.interp.mu.Lock()
	ic, ok := s.interp.ctxs[id]
	delete(s.interp.ctxs, id)
	s.interp.mu.Unlock()
	if !ok {
		return notFound("interpreter context %q not found", id)
	}
	ic.destroy()
	writeJSON(w, http.StatusOK, map[string]string{"message": "interpreter context " + id + " deleted"})
	return nil
}

// pythonFor finds python3 and writes the worker program (once), or gives
// the 400 that says what the sandbox lacks.
func (s *Server) pythonFor() (python, script string, err error) {
	python, err = lookPathIn("python3", s.environ())
	if err != nil {
		return "", "", badRequest("cannot start a python interpreter: %v; install python3 in the sandbox", err)
	}
	s.interp.once.Do(func() {
		p := filepath.Join(s.tmpDir, "agentbox_interpreter.py")
		if err := s.asUser(func() error { return s.tmpFS.writeFile(p, []byte(interpreterWorker), 0o600) }); err != nil {
			s.interp.scriptErr = fmt.Errorf("writing the interpreter program: %w", err)
			return
		}
		s.interp.script = p
	})
	return python, s.interp.script, s.interp.scriptErr
}

// newContext registers a context and starts its worker.
func (s *Server) newContext(id, cwd string) (*interpContext, error) {
	python, script, err := s.pythonFor()
	if err != nil {
		return nil, err
	}
	ic := &interpContext{id: id, cwd: cwd, created: time.Now(), turn: make(chan struct{}, 1)}
	ic.turn <- struct{}{}
	s.interp.mu.Lock()
	if s.interp.closed {
		s.interp.mu.Unlock()
		return nil, errClosed
	}
	if s.interp.ctxs == nil {
		s.interp.ctxs = make(map[string]*interpContext)
	}
	if old, ok := s.interp.ctxs[id]; ok {
		s.interp.mu.Unlock()
		return old, nil // the default context, made meanwhile
	}
	s.interp.ctxs[id] = ic
	s.interp.mu.Unlock()
	if _, err := ic.worker(s, python, script); err != nil {
		s.interp.mu.Lock()
		delete(s.interp.ctxs, id)
		s.interp.mu.Unlock()
		return nil, err
	}
	return ic, nil
}

// context returns the context named id ("" or defaultContextID: the
// default one, created on first use).
func (s *Server) interpContext(id string) (*interpContext, error) {
	if id == "" {
		id = defaultContextID
	}
	s.interp.mu.Lock()
	ic, ok := s.interp.ctxs[id]
	closed := s.interp.closed
	s.interp.mu.Unlock()
	switch {
	case ok:
		return ic, nil
	case closed:
		return nil, errClosed
	case id != defaultContextID:
		return nil, notFound("interpreter context %q not found", id)
	}
	return s.newContext(defaultContextID, s.workDir)
}

// worker returns the context's running worker, starting one when there is
// none (first use, or the last one died and took the state with it).
func (ic *interpContext) worker(s *Server, python, script string) (*worker, error) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.deleted {
		return nil, notFound("interpreter context %q was deleted", ic.id)
	}
	if ic.w != nil {
		select {
		case <-ic.w.exited:
			ic.w.stop()
			ic.w = nil
		default:
			return ic.w, nil
		}
	}
	w, err := s.startWorker(python, script, ic.cwd)
	if err != nil {
		return nil, err
	}
	ic.w = w
	return w, nil
}

func (ic *interpContext) info() toolbox.InterpreterContext {
	ic.mu.Lock()
	active := ic.w != nil && !ic.deleted
	if active {
		select {
		case <-ic.w.exited:
			active = false
		default:
		}
	}
	ic.mu.Unlock()
	return toolbox.InterpreterContext{
		ID:        ic.id,
		Cwd:       ic.cwd,
		Language:  toolbox.LanguagePython,
		CreatedAt: ic.created.UTC().Format(time.RFC3339Nano),
		Active:    active,
	}
}

// destroy ends the context's worker; a running execution ends with it.
func (ic *interpContext) destroy() {
	ic.mu.Lock()
	ic.deleted = true
	w := ic.w
	ic.w = nil
	ic.mu.Unlock()
	if w != nil {
		w.stop()
	}
}

// closeInterpreters destroys every context (Server.Close).
func (s *Server) closeInterpreters() {
	s.interp.mu.Lock()
	s.interp.closed = true
	ctxs := s.interp.ctxs
	s.interp.ctxs = nil
	s.interp.mu.Unlock()
	for _, ic := range ctxs {
		ic.destroy()
	}
}

// acquire waits for the context's turn; release gives it back.
func (ic *interpContext) acquire(ctx context.Context) error {
	select {
	case <-ic.turn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (ic *interpContext) release() { ic.turn <- struct{}{} }

var errWorkerExited = errors.New("the interpreter process exited")
