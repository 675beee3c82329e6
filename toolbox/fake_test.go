package toolbox_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// fakeServer is a small toolbox server following the Daytona spec (and the
// agentbox extensions when ext is set), scripted by the tests: commands'
// logs and exit codes are set by the test, not by running anything.
type fakeServer struct {
	ext string // X-Agentbox-Extensions value; "" = plain Daytona

	// WebSocket follow behaviour.
	wsMode     string // "" (normal), "reject" (no upgrade), "abort" (abnormal close after abortAfter bytes), "plainclose" (1000 without reason at abortAfter)
	abortAfter int
	chunk      int // bytes per WebSocket message in marker mode; 0 = 1024

	files string // root of the files API; paths are joined under it

	novalidate bool // do not wrap the server with the spec validator

	mu       sync.Mutex
	sessions map[string]map[string]*fakeCmd
	scripts  map[string]*fakeCmd // sync exec results by command text
	nextID   int
	reqs     []*http.Request
	wsConns  int
	polls    int
	running  int           // polls of a command that had not ended
	changed  chan struct{} // closed and replaced on every change
}

type fakeCmd struct {
	id, command string
	log         []byte // marked log
	exit        *int
	stdin       []byte
	stdinClosed bool
	echo        bool
}

func newFakeServer(ext string) *fakeServer {
	return &fakeServer{
		ext:      ext,
		sessions: map[string]map[string]*fakeCmd{},
		scripts:  map[string]*fakeCmd{},
		changed:  make(chan struct{}),
	}
}

// notify wakes followers; s.mu must be held.
func (s *fakeServer) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitUntil waits until cond, called with s.mu held, holds (true) or ctx
// is done (false).
func (s *fakeServer) waitUntil(ctx context.Context, cond func() bool) bool {
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// addCommand registers a running command in a session (creating it).
func (s *fakeServer) addCommand(sid, cid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[sid] == nil {
		s.sessions[sid] = map[string]*fakeCmd{}
	}
	s.sessions[sid][cid] = &fakeCmd{id: cid, command: "cmd " + cid}
}

// appendLog appends marked log bytes to a command.
func (s *fakeServer) appendLog(sid, cid string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.sessions[sid][cid]
	c.log = append(c.log, b...)
	s.notify()
}

func (s *fakeServer) exit(sid, cid string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[sid][cid].exit = &code
	s.notify()
}

func (s *fakeServer) deleteSession(sid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sid)
	s.notify()
}

func (s *fakeServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func (s *fakeServer) has(ext string) bool {
	for _, e := range strings.Split(s.ext, ",") {
		if e == ext {
			return true
		}
	}
	return false
}

func (s *fakeServer) uses(r *http.Request, ext string) bool {
	if !s.has(ext) {
		return false
	}
	for _, e := range strings.Split(r.Header.Get(toolbox.HeaderUseExtensions), ",") {
		if strings.TrimSpace(e) == ext {
			return true
		}
	}
	return false
}

func writeErr(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(toolbox.ErrorResponse{
		StatusCode: status, Code: code, Message: msg,
		Timestamp: time.Now().UTC().Format(time.RFC3339), Path: r.URL.Path, Method: r.Method,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *fakeServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, toolbox.VersionResponse{Version: "v0.0.0-fake"})
	})
	mux.HandleFunc("GET /work-dir", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, toolbox.DirResponse{Dir: "/work"})
	})
	mux.HandleFunc("GET /user-home-dir", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, toolbox.DirResponse{Dir: "/home/daytona"})
	})
	mux.HandleFunc("POST /process/execute", func(w http.ResponseWriter, r *http.Request) {
		var req toolbox.ExecuteRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || strings.TrimSpace(req.Command) == "" {
			writeErr(w, r, 400, "BAD_REQUEST", "bad request: command is required")
			return
		}
		if req.Command == "sleep" && req.Timeout > 0 {
			writeErr(w, r, 408, "REQUEST_TIMEOUT", "request timeout: command execution timeout")
			return
		}
		writeJSON(w, 200, toolbox.ExecuteResponse{ExitCode: 0, Result: "ran: " + req.Command + " in " + req.Cwd})
	})
	mux.HandleFunc("POST /process/session", func(w http.ResponseWriter, r *http.Request) {
		var req toolbox.CreateSessionRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.sessions[req.SessionID]; ok {
			writeErr(w, r, 409, "CONFLICT", "conflict: session already exists")
			return
		}
		s.sessions[req.SessionID] = map[string]*fakeCmd{}
		w.WriteHeader(201)
	})
	mux.HandleFunc("GET /process/session", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := []toolbox.Session{}
		for id, cmds := range s.sessions {
			list = append(list, toolbox.Session{SessionID: id, Commands: cmdList(cmds)})
		}
		writeJSON(w, 200, list)
	})
	mux.HandleFunc("GET /process/session/{sid}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		cmds, ok := s.sessions[r.PathValue("sid")]
		if !ok {
			writeErr(w, r, 404, "NOT_FOUND", "not found: session not found")
			return
		}
		writeJSON(w, 200, toolbox.Session{SessionID: r.PathValue("sid"), Commands: cmdList(cmds)})
	})
	mux.HandleFunc("DELETE /process/session/{sid}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.sessions[r.PathValue("sid")]; !ok {
			writeErr(w, r, 404, "NOT_FOUND", "not found: session not found")
			return
		}
		delete(s.sessions, r.PathValue("sid"))
		s.notify()
		w.WriteHeader(204)
	})
	mux.HandleFunc("POST /process/session/{sid}/exec", s.exec)
	mux.HandleFunc("GET /process/session/{sid}/command/{cid}", func(w http.ResponseWriter, r *http.Request) {
		c := s.command(w, r)
		if c == nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		writeJSON(w, 200, toolbox.Command{ID: c.id, Command: c.command, ExitCode: c.exit})
	})
	mux.HandleFunc("GET /process/session/{sid}/command/{cid}/logs", s.logs)
	mux.HandleFunc("POST /process/session/{sid}/command/{cid}/input", s.input)
	s.fileRoutes(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
		if s.ext != "" {
			w.Header().Set(toolbox.HeaderExtensions, s.ext)
		}
		mux.ServeHTTP(w, r)
	})
}

func cmdList(m map[string]*fakeCmd) []toolbox.Command {
	list := []toolbox.Command{}
	for _, c := range m {
		list = append(list, toolbox.Command{ID: c.id, Command: c.command, ExitCode: c.exit})
	}
	return list
}

func (s *fakeServer) command(w http.ResponseWriter, r *http.Request) *fakeCmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmds, ok := s.sessions[r.PathValue("sid")]
	if !ok {
		writeErr(w, r, 404, "NOT_FOUND", "not found: session not found")
		return nil
	}
	c, ok := cmds[r.PathValue("cid")]
	if !ok {
		writeErr(w, r, 404, "NOT_FOUND", "not found: command not found")
		return nil
	}
	return c
}

// exec answers from s.scripts (sync) or registers a running command (async).
func (s *fakeServer) exec(w http.ResponseWriter, r *http.Request) {
	var req toolbox.SessionExecuteRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, r, 400, "INVALID_REQUEST_BODY", "bad request: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cmds, ok := s.sessions[r.PathValue("sid")]
	if !ok {
		writeErr(w, r, 404, "NOT_FOUND", "not found: session not found")
		return
	}
	s.nextID++
	id := "cmd-" + strconv.Itoa(s.nextID)
	if req.RunAsync || req.Async {
		cmds[id] = &fakeCmd{id: id, command: req.Command, echo: !req.SuppressInputEcho}
		writeJSON(w, 202, toolbox.SessionExecuteResponse{CmdID: id})
		return
	}
	script := s.scripts[req.Command]
	if script == nil {
		script = &fakeCmd{exit: new(int)}
	}
	cmds[id] = &fakeCmd{id: id, command: req.Command, log: script.log, exit: script.exit}
	out, errb := splitLog(script.log)
	resp := map[string]any{"cmdId": id, "exitCode": *script.exit, "extraField": true}
	switch {
	case s.uses(r, "base64"):
		w.Header().Set("X-Agentbox-Encoding", "base64")
		resp["output"] = string(script.log)
		resp["stdout"] = base64.StdEncoding.EncodeToString(out)
		resp["stderr"] = base64.StdEncoding.EncodeToString(errb)
	case r.Header.Get(toolbox.HeaderSDKVersion) == "old":
		// Like a server with no split fields: output only.
		resp["output"] = string(script.log)
	default:
		resp["output"] = string(script.log)
		resp["stdout"] = string(out)
		resp["stderr"] = string(errb)
	}
	writeJSON(w, 200, resp)
}

func (s *fakeServer) input(w http.ResponseWriter, r *http.Request) {
	c := s.command(w, r)
	if c == nil {
		return
	}
	var req toolbox.SessionSendInputRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, r, 400, "INVALID_REQUEST_BODY", "bad request: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.exit != nil {
		writeErr(w, r, 410, "GONE", "gone: command has already completed")
		return
	}
	data := []byte(req.Data)
	if s.uses(r, "stdin") {
		if r.Header.Get(toolbox.HeaderStdinEncoding) == "base64" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(req.Data); err != nil {
				writeErr(w, r, 400, "BAD_REQUEST", "bad base64: "+err.Error())
				return
			}
		}
		c.stdin = append(c.stdin, data...)
		if r.Header.Get("X-Agentbox-Stdin-Close") == "true" {
			c.stdinClosed = true
		}
	} else {
		if !bytes.HasSuffix(data, []byte("\n")) {
			data = append(data, '\n')
		}
		c.stdin = append(c.stdin, data...)
		if c.echo {
			c.log = append(c.log, append([]byte{1, 1, 1}, data...)...)
			s.notify()
		}
	}
	w.WriteHeader(204)
}

func (s *fakeServer) logs(w http.ResponseWriter, r *http.Request) {
	c := s.command(w, r)
	if c == nil {
		return
	}
	if r.Header.Get("Upgrade") != "" && r.URL.Query().Get("follow") == "true" && s.wsMode != "reject" {
		s.follow(w, r, c)
		return
	}
	s.mu.Lock()
	s.polls++
	s.notify()
	log := append([]byte(nil), c.log...)
	complete := c.exit != nil
	if !complete {
		s.running++
	}
	s.mu.Unlock()
	// A real server knows each chunk's stream; the fake must not take a
	// trailing partial marker for data.
	out, errb := splitLog(log[:safeEnd(log, complete)])
	resp := map[string]any{"output": string(log), "stdout": string(out), "stderr": string(errb)}
	if s.uses(r, "base64") {
		w.Header().Set("X-Agentbox-Encoding", "base64")
		resp["stdout"] = base64.StdEncoding.EncodeToString(out)
		resp["stderr"] = base64.StdEncoding.EncodeToString(errb)
	}
	writeJSON(w, 200, resp)
}

// follow streams the log from byte 0 over a WebSocket, then tails it.
func (s *fakeServer) follow(w http.ResponseWriter, r *http.Request, c *fakeCmd) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	frames := s.uses(r, "frames")
	s.mu.Lock()
	s.wsConns++
	s.notify()
	s.mu.Unlock()
	chunk := s.chunk
	if chunk <= 0 {
		chunk = 1024
	}
	sid := r.PathValue("sid")
	// CloseRead cancels ctx when the client goes away.
	ctx := conn.CloseRead(r.Context())
	sent := 0
	for {
		s.mu.Lock()
		_, alive := s.sessions[sid]
		log := append([]byte(nil), c.log...)
		exit := c.exit
		changed := s.changed
		s.mu.Unlock()
		if !alive {
			if frames {
				_ = conn.Close(websocket.StatusNormalClosure, "killed")
			} else {
				_ = conn.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		for sent < len(log) {
			end := min(sent+chunk, len(log))
			if frames {
				end = safeEnd(log, exit != nil)
			}
			if s.abortAfter > 0 && end > s.abortAfter {
				end = max(s.abortAfter, sent)
			}
			if end <= sent && !(s.abortAfter > 0 && sent >= s.abortAfter) {
				break
			}
			if end > sent {
				if err := s.send(ctx, conn, frames, log[:end], sent); err != nil {
					return
				}
				sent = end
			}
			if s.abortAfter > 0 && sent >= s.abortAfter {
				switch s.wsMode {
				case "abort":
					return // CloseNow: abnormal closure
				case "plainclose":
					_ = conn.Close(websocket.StatusNormalClosure, "")
					return
				}
			}
		}
		if exit != nil && sent == len(log) {
			reason := ""
			if frames {
				reason = "exit=" + strconv.Itoa(*exit)
			}
			_ = conn.Close(websocket.StatusNormalClosure, reason)
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// send sends log[from:] (log is the whole log so far). In frames mode a
// message carries one stream's bytes: the log is split by markers and the
// parts after from are sent.
func (s *fakeServer) send(ctx context.Context, conn *websocket.Conn, frames bool, log []byte, from int) error {
	if !frames {
		return conn.Write(ctx, websocket.MessageBinary, log[from:])
	}
	for _, sg := range segments(log) {
		a, b := max(sg.start, from), sg.end
		if a >= b {
			continue
		}
		msg := append([]byte{sg.stream}, log[a:b]...)
		if err := conn.Write(ctx, websocket.MessageBinary, msg); err != nil {
			return err
		}
	}
	return nil
}

// safeEnd is how much of log can be sent as frames: not a trailing
// partial marker, unless the log is complete.
func safeEnd(log []byte, complete bool) int {
	n := len(log)
	if complete || n == 0 {
		return n
	}
	b := log[n-1]
	if b != 1 && b != 2 {
		return n
	}
	run := 0
	for run < n && log[n-1-run] == b {
		run++
	}
	return n - run%3
}

type segment struct {
	stream     byte
	start, end int // payload range in the log
}

// segments is the reference splitter used by the fake: a full marker
// switches the stream; everything else is payload.
func segments(log []byte) []segment {
	var out []segment
	cur := byte(1)
	start := 0
	for i := 0; i < len(log); {
		if i+3 <= len(log) && (log[i] == 1 || log[i] == 2) && log[i+1] == log[i] && log[i+2] == log[i] {
			if i > start {
				out = append(out, segment{cur, start, i})
			}
			cur = log[i]
			i += 3
			start = i
			continue
		}
		i++
	}
	if len(log) > start {
		out = append(out, segment{cur, start, len(log)})
	}
	return out
}

func splitLog(log []byte) (stdout, stderr []byte) {
	for _, sg := range segments(log) {
		if sg.stream == 1 {
			stdout = append(stdout, log[sg.start:sg.end]...)
		} else {
			stderr = append(stderr, log[sg.start:sg.end]...)
		}
	}
	return stdout, stderr
}

// fileRoutes serves the files API from s.files.
func (s *fakeServer) fileRoutes(mux *http.ServeMux) {
	local := func(p string) string { return filepath.Join(s.files, filepath.FromSlash(p)) }
	info := func(p string, fi os.FileInfo) toolbox.FileInfo {
		return toolbox.FileInfo{
			Name: fi.Name(), Path: p, Size: fi.Size(), Mode: fi.Mode().String(),
			Permissions: fmt.Sprintf("%04o", fi.Mode().Perm()), IsDir: fi.IsDir(),
			Owner: "daytona", Group: "daytona", ModifiedAt: fi.ModTime().UTC().Format(time.RFC3339),
			ModTime: fi.ModTime().String(),
		}
	}
	notFound := func(w http.ResponseWriter, r *http.Request, err error) {
		if os.IsNotExist(err) {
			writeErr(w, r, 404, "NOT_FOUND", "not found: "+err.Error())
			return
		}
		writeErr(w, r, 400, "BAD_REQUEST", err.Error())
	}
	mux.HandleFunc("GET /files", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		ents, err := os.ReadDir(local(p))
		if err != nil {
			notFound(w, r, err)
			return
		}
		list := []toolbox.FileInfo{}
		for _, e := range ents {
			fi, _ := e.Info()
			list = append(list, info(p+"/"+e.Name(), fi))
		}
		writeJSON(w, 200, list)
	})
	mux.HandleFunc("GET /files/info", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		fi, err := os.Stat(local(p))
		if err != nil {
			notFound(w, r, err)
			return
		}
		writeJSON(w, 200, info(p, fi))
	})
	mux.HandleFunc("GET /files/download", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(local(r.URL.Query().Get("path")))
		if err != nil {
			// The spec declares only application/octet-stream here,
			// errors included.
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(404)
			_ = json.NewEncoder(w).Encode(toolbox.ErrorResponse{StatusCode: 404, Message: "not found: " + err.Error(), Path: r.URL.Path})
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, f)
	})
	mux.HandleFunc("POST /files/bulk-upload", func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			writeErr(w, r, 400, "BAD_REQUEST", err.Error())
			return
		}
		var resp toolbox.BulkUploadResponse
		paths := map[string]string{}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeErr(w, r, 400, "BAD_REQUEST", err.Error())
				return
			}
			name := part.FormName()
			idx := strings.TrimSuffix(strings.TrimSuffix(name, ".path"), ".file")
			switch {
			case strings.HasSuffix(name, ".path"):
				b, _ := io.ReadAll(part)
				paths[idx] = string(b)
			case strings.HasSuffix(name, ".file"):
				p, ok := paths[idx]
				if !ok {
					resp.Errors = append(resp.Errors, name+": file part before its path")
					_, _ = io.Copy(io.Discard, part)
					continue
				}
				_ = os.MkdirAll(filepath.Dir(local(p)), 0o755)
				f, err := os.Create(local(p))
				if err != nil {
					resp.Errors = append(resp.Errors, err.Error())
					continue
				}
				n, _ := io.Copy(f, part)
				f.Close()
				resp.Files = append(resp.Files, toolbox.BulkUploadedFile{Path: p, Bytes: n})
			}
		}
		if len(resp.Errors) > 0 {
			writeJSON(w, 400, resp)
			return
		}
		writeJSON(w, 200, resp)
	})
	mux.HandleFunc("POST /files/folder", func(w http.ResponseWriter, r *http.Request) {
		mode, err := strconv.ParseUint(r.URL.Query().Get("mode"), 8, 32)
		if err != nil {
			writeErr(w, r, 400, "BAD_REQUEST", "bad request: invalid mode")
			return
		}
		if err := os.MkdirAll(local(r.URL.Query().Get("path")), os.FileMode(mode)); err != nil {
			writeErr(w, r, 400, "BAD_REQUEST", err.Error())
			return
		}
		w.WriteHeader(201)
	})
	mux.HandleFunc("DELETE /files", func(w http.ResponseWriter, r *http.Request) {
		p := local(r.URL.Query().Get("path"))
		var err error
		if r.URL.Query().Get("recursive") == "true" {
			if _, err = os.Stat(p); err == nil {
				err = os.RemoveAll(p)
			}
		} else {
			err = os.Remove(p)
		}
		if err != nil {
			notFound(w, r, err)
			return
		}
		w.WriteHeader(204)
	})
	mux.HandleFunc("POST /files/move", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if err := os.Rename(local(q.Get("source")), local(q.Get("destination"))); err != nil {
			notFound(w, r, err)
			return
		}
		w.WriteHeader(200)
	})
}
