package daemon

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// systemRoutes serves what concerns the sandbox as a whole: its listening
// ports, its resource use, the environment of new processes, and /init.
func (s *Server) systemRoutes() []route {
	return []route{
		{"GET /port", s.handlePorts},
		{"GET /port/{port}/in-use", s.handlePortInUse},
		{"GET /system/metrics", s.handleMetrics},
		{"POST /env", s.handleUpdateEnv},
		{"POST /init", s.handleInit},
	}
}

// The kernel's tables of the TCP sockets of the server's network
// namespace (the sandbox's, when the server is its init).
const (
	tcpTable  = "/proc/self/net/tcp"
	tcp6Table = "/proc/self/net/tcp6"
)

// handlePorts is GET /port: every TCP port a socket listens on, sorted,
// but the toolbox's own (the port the request came in on, when it came
// over TCP): Daytona's daemon does not list its own port either, and a
// client that previews or waits for "the sandbox's ports" wants the
// sandbox's programs' only.
func (s *Server) handlePorts(w http.ResponseWriter, r *http.Request) error {
	ports, err := listeningPorts(tcpTable, tcp6Table)
	if err != nil {
		return err
	}
	if own, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		ports = slices.DeleteFunc(ports, func(p int) bool { return p == own.Port })
	}
	writeJSON(w, http.StatusOK, toolbox.PortList{Ports: ports})
	return nil
}

// handlePortInUse is GET /port/{port}/in-use: whether a TCP socket
// listens on the port.
func (s *Server) handlePortInUse(w http.ResponseWriter, r *http.Request) error {
	v := r.PathValue("port")
	port, err := strconv.Atoi(v)
	if err != nil || port < 1 || port > 65535 {
		return badRequest("invalid port %q: give a number from 1 to 65535", v)
	}
	ports, err := listeningPorts(tcpTable, tcp6Table)
	if err != nil {
		return err
	}
	_, found := slices.BinarySearch(ports, port)
	writeJSON(w, http.StatusOK, toolbox.IsPortInUseResponse{IsInUse: found})
	return nil
}

// listeningPorts reads /proc/net/tcp-style tables and returns the local
// ports of the sockets in state LISTEN, sorted and without duplicates. A
// missing table (no IPv6) counts as empty.
func listeningPorts(tables ...string) ([]int, error) {
	seen := map[int]bool{}
	for _, t := range tables {
		f, err := os.Open(t)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = parseListening(f, seen)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// parseListening adds to seen the local ports of the LISTEN sockets of a
// /proc/net/tcp table, whose lines read
//
//	sl  local_address rem_address   st …
//	 0: 0100007F:1F90 00000000:0000 0A …
func parseListening(r io.Reader, seen map[int]bool) error {
	sc := bufio.NewScanner(r)
	sc.Scan() // the heading
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if port, err := strconv.ParseUint(hexPort, 16, 16); err == nil && port > 0 {
			seen[int(port)] = true
		}
	}
	return sc.Err()
}

// environ returns the base environment of new processes. The slice is
// never changed in place: callers may keep it but not modify it.
func (s *Server) environ() []string {
	s.envMu.Lock()
	defer s.envMu.Unlock()
	return s.baseEnv
}

// handleUpdateEnv is POST /env: it changes the environment that processes
// started afterwards get (one-shot executions and new sessions); running
// processes and existing sessions keep theirs. The request is checked
// whole before anything changes.
func (s *Server) handleUpdateEnv(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.UpdateEnvRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	for _, k := range req.Unset {
		if !sandbox.ValidEnvName(k) {
			return badRequest("cannot unset %q: names must match [A-Za-z_][A-Za-z0-9_]*", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(req.Set)) {
		if !sandbox.ValidEnvName(k) {
			return badRequest("invalid environment variable name %q: names must match [A-Za-z_][A-Za-z0-9_]* (a name a shell can export)", k)
		}
		if strings.ContainsRune(req.Set[k], 0) {
			return badRequest("invalid value of environment variable %q: values must not contain NUL", k)
		}
	}
	s.envMu.Lock()
	s.baseEnv = updateEnv(s.baseEnv, req)
	s.envMu.Unlock()
	writeJSON(w, http.StatusOK, toolbox.MessageResponse{Message: "environment updated"})
	return nil
}

// updateEnv returns env ("K=V" entries) changed as req says: Unset and
// UnsetValuePrefix first, then Set. env itself is not modified.
func updateEnv(env []string, req toolbox.UpdateEnvRequest) []string {
	out := make([]string, 0, len(env)+len(req.Set))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		_, set := req.Set[k]
		switch {
		case set, slices.Contains(req.Unset, k):
		case req.UnsetValuePrefix != "" && strings.HasPrefix(v, req.UnsetValuePrefix):
		default:
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(req.Set)) {
		out = append(out, k+"="+req.Set[k])
	}
	return out
}

// handleInit is POST /init. Daytona's daemon keeps the token to
// authenticate later requests and starts its telemetry; this server
// authenticates nothing itself (a local sandbox's server is reached only
// through its unix socket, and Daytona's proxy checks tokens before
// forwarding) and has no telemetry, so it checks the request and answers
// as Daytona does. The token is not kept.
func (s *Server) handleInit(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.InitializeRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Token == "" {
		return errorf(http.StatusBadRequest, codeInvalidRequestBody, "invalid request body: token is required")
	}
	writeJSON(w, http.StatusOK, toolbox.MessageResponse{Message: "initialized: this server needs no token and has no telemetry"})
	return nil
}
