package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/secretproxy"
)

// The shared egress proxy: one process per state dir serves the egress
// proxy of every running sandbox of it that has a DomainAllowList (see
// domainproxy.go). This file is the process; egressclient_linux.go is
// how an engine talks to it.
//
// It is this program re-executed as "agentbox-netproxy", outside every
// namespace of the sandboxes, as nobody (65534) with no_new_privs when
// started by root: it needs no privilege, only the descriptors it is
// given. Its descriptors:
//
//	3  the listening control socket (SOCK_SEQPACKET), <StateDir>/egress-proxy.sock,
//	   made by the engine that started it
//	4  <StateDir>/egress-proxy.lock, open: it takes the lock before it exits
//
// Each sandbox it serves has a proxy of its own (an egress.Proxy: its
// allow list, its connection limit, its policy log), serving the
// sandbox's listening sockets, which the engine hands over with the
// sandbox's policy log file. It watches each sandbox's init through a
// pidfd and forgets the sandbox when the init ends; when it serves no
// sandbox any more, it exits.
//
// It exits under the lock, which every engine holds for as long as it
// talks to it: so an engine never hands a sandbox to a proxy about to
// exit, and finds either a proxy that serves or none (a refused
// connection), in which case it starts one.

// egressProxyEnv marks a re-executed egress proxy: egressSpawn for the
// short-lived process that starts it (so that it is no engine's child),
// egressServe for the proxy itself.
const egressProxyEnv = "_AGENTBOX_EGRESS_PROXY"

const (
	egressSpawn = "spawn"
	egressServe = "serve"
)

// The proxy's descriptors.
const (
	egressFDControl = 3
	egressFDLock    = 4
)

// nobodyID is the uid and gid of the proxy when the engine runs as root.
const nobodyID = 65534

// egressRequest is a request of an engine to the shared proxy, one
// message on the control socket. "serve" comes with descriptors: the
// sandbox's policy log file, then its listening sockets.
type egressRequest struct {
	// Op is "serve" (serve the sandbox ID, in place of any earlier
	// proxy of it), "allow" (change its allow list), "secrets" (replace
	// its secrets), "redirect" (serve its secrets' redirect mode, with
	// its socket helper's end and listening sockets), "drop" (stop
	// serving it) or "status".
	Op    string `json:"op"`
	ID    string `json:"id,omitempty"`
	Allow string `json:"allow,omitempty"`
	// InitPID and InitStart identify the init whose end ends the
	// sandbox's proxy.
	InitPID   int    `json:"initPid,omitempty"`
	InitStart uint64 `json:"initStart,omitempty"`
	// Secrets: the sandbox has secrets, in the memfd that comes after
	// the policy log ("serve") or alone ("secrets": replace them; none
	// without it).
	Secrets bool `json:"secrets,omitempty"`
	egressTestHooks
}

// egressReply is the proxy's answer to a request.
type egressReply struct {
	Error string `json:"error,omitempty"`
	// PID is the proxy's pid; Serves, for "status", the sandboxes it
	// serves.
	PID    int      `json:"pid"`
	Serves []string `json:"serves,omitempty"`
}

// egressProxyMain runs the shared egress proxy (or the process that
// starts it) when this process is one, and exits; otherwise it returns
// at once.
func egressProxyMain() {
	mode, ok := os.LookupEnv(egressProxyEnv)
	if !ok {
		return
	}
	os.Unsetenv(egressProxyEnv)
	switch mode {
	case egressSpawn:
		os.Exit(spawnEgressProxy())
	case egressServe:
		os.Exit(runEgressProxy())
	}
	os.Exit(2)
}

// egressProxyCommand returns the command of a process of the shared
// proxy in mode, with the proxy's descriptors files.
func egressProxyCommand(mode string, files []*os.File) *exec.Cmd {
	return &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"agentbox-netproxy"},
		// Every P: the one process carries the traffic of every sandbox of
		// the state dir (a P's memory, paid once, is nothing per sandbox).
		Env: []string{
			egressProxyEnv + "=" + mode,
			"GOGC=50", "GODEBUG=madvdontneed=1", "GORACE=atexit_sleep_ms=0",
		},
		ExtraFiles:  files,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		Dir:         "/",
	}
}

// spawnEgressProxy starts the proxy with this process's descriptors 3
// and 4, as nobody when root, and returns: the proxy is then an orphan,
// reaped by the system, whichever engine process started it and
// whenever that one ends.
func spawnEgressProxy() int {
	cmd := egressProxyCommand(egressServe, []*os.File{os.NewFile(egressFDControl, "control"), os.NewFile(egressFDLock, "lock")})
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start the egress proxy:", err)
		return 1
	}
	return 0
}

// egressServer is the state of the shared proxy.
type egressServer struct {
	lock *os.File
	idle chan struct{} // a sandbox was forgotten: maybe none is left

	mu    sync.Mutex
	boxes map[string]*egressBox
}

// egressBox is the proxy of one sandbox.
type egressBox struct {
	p        *egress.Proxy
	sp       *secretproxy.Proxy // its Intercept, when the sandbox has secrets (guarded by the server's mu)
	rec      *policyRecorder
	rd       atomic.Pointer[redirectServing] // the secrets' redirect mode (egressd_redirect_linux.go)
	stopInit func()                          // stops watching the init
	once     sync.Once
}

// close ends the sandbox's proxy and its connections, and writes its
// policy log.
func (b *egressBox) close() {
	b.once.Do(func() {
		b.stopInit()
		b.p.Close()
		if r := b.rd.Swap(nil); r != nil {
			r.close()
		}
		if b.sp != nil {
			b.sp.Close()
		}
		b.rec.close()
	})
}

// runEgressProxy serves the control socket until no sandbox is left.
func runEgressProxy() int {
	_ = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	lf := os.NewFile(egressFDControl, "control")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return 1
	}
	s := &egressServer{lock: os.NewFile(egressFDLock, "lock"), idle: make(chan struct{}, 1), boxes: map[string]*egressBox{}}
	s.idle <- struct{}{} // the engine that started it holds the lock until it served its sandbox
	go s.exitWhenIdle()
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go s.serveControl(c.(*net.UnixConn))
	}
}

// exitWhenIdle exits the process, under the lock, once no sandbox is
// served.
func (s *egressServer) exitWhenIdle() {
	for range s.idle {
		s.mu.Lock()
		n := len(s.boxes)
		s.mu.Unlock()
		if n > 0 {
			continue
		}
		if err := unix.Flock(int(s.lock.Fd()), unix.LOCK_EX); err != nil {
			os.Exit(1)
		}
		s.mu.Lock()
		if len(s.boxes) == 0 {
			os.Exit(0) // releases the lock
		}
		s.mu.Unlock()
		_ = unix.Flock(int(s.lock.Fd()), unix.LOCK_UN)
	}
}

// serveControl answers the requests of one engine connection.
func (s *egressServer) serveControl(c *net.UnixConn) {
	defer c.Close()
	buf := make([]byte, 1<<16)
	oob := make([]byte, unix.CmsgSpace(8*4))
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		fds, _ := receivedFDs(oob[:oobn])
		files := make([]*os.File, len(fds))
		for i, fd := range fds {
			files[i] = os.NewFile(uintptr(fd), "handed-over")
		}
		reply := egressReply{PID: os.Getpid()}
		var req egressRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			reply.Error = "bad request: " + err.Error()
		} else if err := s.handle(&req, files, &reply); err != nil {
			reply.Error = err.Error()
		}
		closeFiles(files)
		b, _ := json.Marshal(reply)
		if _, err := c.Write(b); err != nil {
			return
		}
	}
}

// handle runs req, with the descriptors files (which it does not keep).
func (s *egressServer) handle(req *egressRequest, files []*os.File, reply *egressReply) error {
	switch req.Op {
	case "serve":
		return s.serve(req, files)
	case "allow":
		l, err := egress.ParseAllowList(req.Allow)
		if err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		b := s.boxes[req.ID]
		if b == nil {
			return fmt.Errorf("sandbox %q is not served", req.ID)
		}
		b.p.SetAllowList(l)
		return nil
	case "secrets":
		return s.setSecrets(req, files)
	case "redirect":
		return s.serveRedirect(req, files)
	case "drop":
		s.forget(req.ID, nil)
		return nil
	case "status":
		s.mu.Lock()
		defer s.mu.Unlock()
		for id := range s.boxes {
			reply.Serves = append(reply.Serves, id)
		}
		return nil
	}
	return fmt.Errorf("unknown request %q", req.Op)
}

// serve starts the proxy of the sandbox req.ID on the listening sockets
// files[1:] (none while the sandbox boots), with the policy log files[0],
// in place of any earlier one.
func (s *egressServer) serve(req *egressRequest, files []*os.File) error {
	if len(files) < 1 {
		return errors.New("serve: want the policy log")
	}
	allow, err := egress.ParseAllowList(req.Allow)
	if err != nil {
		return err
	}
	lnFiles, secrets := files[1:], files[1:1]
	if req.Secrets && len(lnFiles) > 0 {
		lnFiles, secrets = files[2:], files[1:2]
	}
	var lns []net.Listener
	for _, f := range lnFiles {
		ln, err := net.FileListener(f)
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return err
		}
		lns = append(lns, ln)
	}
	ended, stop, err := watchExit(req.InitPID, req.InitStart)
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	// The earlier proxy writes its log before the new one reads it.
	s.forget(req.ID, nil)
	logf, err := dupFile(files[0])
	if err != nil {
		stop()
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	rec := newPolicyRecorder(logf)
	var resolver egress.Resolver = net.DefaultResolver
	if len(req.Hosts) > 0 {
		// Tests: their names only, never the host's DNS.
		resolver = &egress.StaticResolver{Hosts: req.Hosts}
	}
	b := &egressBox{
		p:        egress.New(egress.Config{Allow: allow, Resolver: resolver, AllowNonPublic: req.AllowNonPublic, OnRefusal: rec.add}),
		rec:      rec,
		stopInit: stop,
	}
	if err := b.setSecrets(req, secrets); err != nil {
		b.close()
		for _, ln := range lns {
			ln.Close()
		}
		return fmt.Errorf("serve: secrets: %w", err)
	}
	for _, ln := range lns {
		go func() { _ = b.p.Serve(ln) }()
	}
	s.mu.Lock()
	s.boxes[req.ID] = b
	s.mu.Unlock()
	go func() {
		<-ended
		s.forget(req.ID, b)
	}()
	return nil
}

// forget stops serving the sandbox id (only if its proxy is b, when b is
// not nil).
func (s *egressServer) forget(id string, b *egressBox) {
	s.mu.Lock()
	cur := s.boxes[id]
	if cur == nil || b != nil && cur != b {
		s.mu.Unlock()
		if b != nil {
			b.close()
		}
		return
	}
	delete(s.boxes, id)
	s.mu.Unlock()
	cur.close()
	select {
	case s.idle <- struct{}{}:
	default:
	}
}

// dupFile returns a new descriptor of f, which the caller may close.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
