package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// egressProxyEnv marks a re-executed egress proxy helper; its value is
// the helper's egressProxyConfig as JSON.
const egressProxyEnv = "_AGENTBOX_EGRESS_PROXY"

// The helper's descriptors.
const (
	egressFDHandOver = 3 // where the host sends the listening sockets
	egressFDLog      = 4 // the policy log file
	egressFDAllow    = 5 // the allow list file, read again on SIGHUP
)

// nobodyID is the uid and gid of the helper when the engine runs as root.
const nobodyID = 65534

// egressHelper is a started egress proxy helper, waiting for its
// listening sockets.
type egressHelper struct {
	handOver *os.File // the host's end of the helper's hand-over socket
}

// startEgressProxy starts the egress proxy helper of the sandbox whose
// metadata m records its running init, and records the helper in m. It
// returns nil, nil when the sandbox has no domain allow list. The helper
// is this process's child, reaped by s.reap.
func (s *Sandbox) startEgressProxy(m *meta) (*egressHelper, error) {
	if m.Config.DomainAllowList == "" {
		return nil, nil
	}
	logf, err := os.OpenFile(filepath.Join(sandboxDir(s.opts.StateDir, m.ID), egressLogFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, stateDirError(s.opts.StateDir, err)
	}
	defer logf.Close()
	allowf, err := writeAllowFile(sandboxDir(s.opts.StateDir, m.ID), m.Config.DomainAllowList)
	if err != nil {
		return nil, stateDirError(s.opts.StateDir, err)
	}
	defer allowf.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "hand-over"), os.NewFile(uintptr(fds[1]), "hand-over")
	defer theirs.Close()
	cfg, err := json.Marshal(egressProxyConfig{
		ID: m.ID, Allow: m.Config.DomainAllowList, InitPID: m.Init.PID, InitStart: m.Init.StartTime,
		egressTestHooks: s.egressTest,
	})
	if err != nil {
		ours.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"agentbox-netproxy", m.ID},
		// One P: the helper mostly waits for sockets, and every thread the
		// runtime makes costs it stacks for good (0.25 MB less idle, no
		// measurable loss in BenchmarkDomainProxyDownload).
		Env: []string{
			egressProxyEnv + "=" + string(cfg),
			"GOGC=50", "GOMAXPROCS=1", "GODEBUG=madvdontneed=1", "GORACE=atexit_sleep_ms=0",
		},
		ExtraFiles:  []*os.File{theirs, logf, allowf},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		Dir:         "/",
	}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("start the egress proxy: %w", err)
	}
	s.reap(cmd)
	st, _ := procStartTime(cmd.Process.Pid)
	m.EgressProxy = &initRecord{PID: cmd.Process.Pid, StartTime: st}
	return &egressHelper{handOver: ours}, nil
}

// serve hands the helper the listening sockets the init made, handed
// over to the host with its answer.
func (h *egressHelper) serve(listeners []*os.File) error {
	if h == nil {
		return nil
	}
	if len(listeners) == 0 {
		return errors.New("egress proxy: the sandbox init made no listening socket for it")
	}
	fds := make([]int, len(listeners))
	for i, f := range listeners {
		fds[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(int(h.handOver.Fd()), []byte("listen"), unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("egress proxy: hand over its sockets: %w", err)
	}
	return nil
}

// close releases the host's end of the hand-over socket (a helper that
// got nothing then exits).
func (h *egressHelper) close() {
	if h != nil {
		h.handOver.Close()
	}
}

// egressProxyMain runs the egress proxy helper when this process is one,
// and exits; otherwise it returns at once.
func egressProxyMain() {
	cfg, ok := os.LookupEnv(egressProxyEnv)
	if !ok {
		return
	}
	os.Unsetenv(egressProxyEnv)
	os.Exit(runEgressProxy(cfg))
}

// runEgressProxy serves the proxy configured by config (JSON) on the
// listening sockets the host hands over, until the sandbox's init ends or
// a signal asks it to stop.
func runEgressProxy(config string) int {
	_ = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	var cfg egressProxyConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return 1
	}
	allow, err := egress.ParseAllowList(cfg.Allow)
	if err != nil {
		return 1
	}
	initEnded, err := watchExit(cfg.InitPID, cfg.InitStart)
	if err != nil {
		return 1
	}
	listeners, err := receiveListeners(egressFDHandOver)
	if err != nil {
		return 1 // the sandbox did not start
	}
	rec := newPolicyRecorder(os.NewFile(egressFDLog, egressLogFile))
	var resolver egress.Resolver = net.DefaultResolver
	if len(cfg.Hosts) > 0 {
		// Tests: their names only, never the host's DNS.
		resolver = &egress.StaticResolver{Hosts: cfg.Hosts}
	}
	p := egress.New(egress.Config{Allow: allow, Resolver: resolver, AllowNonPublic: cfg.AllowNonPublic, OnRefusal: rec.add})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	served := make(chan struct{}, len(listeners))
	for _, ln := range listeners {
		go func() {
			_ = p.Serve(ln)
			served <- struct{}{}
		}()
	}
	allowf := os.NewFile(egressFDAllow, egressAllowFile)
	defer allowf.Close()
wait:
	for {
		select {
		case sig := <-sigs:
			if sig != unix.SIGHUP {
				break wait
			}
			// The host changed the list (UpdateNetworkSettings).
			if l, err := readAllowFile(allowf); err == nil {
				p.SetAllowList(l)
			}
		case <-initEnded:
			break wait
		case <-served: // a listener failed
			break wait
		}
	}
	p.Close()
	rec.close()
	return 0
}

// receiveListeners waits for the listening sockets the host sends on the
// socket fd, and returns them. It waits in the runtime's poller, so that
// no thread blocks (each costs the helper its stacks for good).
func receiveListeners(fd int) ([]net.Listener, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "hand-over")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 64)
	oob := make([]byte, unix.CmsgSpace(8*4))
	var oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		_, oobn, _, _, rerr = unix.Recvmsg(int(fd), b, oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	fds, err := receivedFDs(oob[:oobn])
	if err != nil || len(fds) == 0 {
		return nil, errors.New("no listening socket received")
	}
	var lns []net.Listener
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// watchExit returns a channel closed when the process pid, started at
// start (/proc/<pid>/stat field 22), has ended; closed at once when it
// already has.
func watchExit(pid int, start uint64) (<-chan struct{}, error) {
	ended := make(chan struct{})
	pfd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		close(ended)
		return ended, nil
	}
	if err != nil {
		return nil, err
	}
	if st, ok := procStartTime(pid); !ok || st != start {
		unix.Close(pfd)
		close(ended)
		return ended, nil
	}
	// The pidfd is non-blocking, so the runtime's poller waits for it to
	// become readable (the process ended): no thread blocks.
	f := os.NewFile(uintptr(pfd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	go func() {
		defer close(ended)
		defer f.Close()
		_ = rc.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0 || err != nil && !errors.Is(err, unix.EINTR)
		})
	}()
	return ended, nil
}

// policyRecorder keeps the policy log file of the sandbox up to date with
// the helper's refusals, rewriting it at most every 100ms.
type policyRecorder struct {
	f     *os.File
	mu    sync.Mutex
	log   policyLog
	dirty chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

// newPolicyRecorder continues the log that f holds (it outlives the
// helpers of the sandbox's boots).
func newPolicyRecorder(f *os.File) *policyRecorder {
	r := &policyRecorder{f: f, dirty: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	r.log, _ = readPolicyLogFile(f)
	go r.run()
	return r
}

// add records ref; it does not wait for the file.
func (r *policyRecorder) add(ref egress.Refusal) {
	r.mu.Lock()
	r.log.Total++
	r.log.Refusals = append(r.log.Refusals, ref)
	if n := len(r.log.Refusals); n > egressLogKeep {
		r.log.Refusals = append(r.log.Refusals[:0], r.log.Refusals[n-egressLogKeep:]...)
	}
	r.mu.Unlock()
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

func (r *policyRecorder) run() {
	defer close(r.done)
	for {
		select {
		case <-r.dirty:
			r.write()
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.stop:
			}
		case <-r.stop:
			r.write()
			return
		}
	}
}

// write rewrites the file under an exclusive lock.
func (r *policyRecorder) write() {
	r.mu.Lock()
	b, err := json.Marshal(r.log)
	r.mu.Unlock()
	fd := int(r.f.Fd())
	if err != nil || unix.Flock(fd, unix.LOCK_EX) != nil {
		return
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	if unix.Ftruncate(fd, 0) == nil {
		_, _ = r.f.WriteAt(b, 0)
	}
}

// close writes what is left and stops.
func (r *policyRecorder) close() {
	close(r.stop)
	<-r.done
	r.f.Close()
}

// listenForEgress runs in the init of a sandbox with a domain allow list,
// in its network namespace: it makes the proxy's listening sockets
// (egressListeners) for the host to hand to the egress proxy helper.
func listenForEgress(cfg *initConfig) error {
	if cfg.DomainAllowList == "" {
		return nil
	}
	files, err := egressListeners()
	cfg.handOver = append(cfg.handOver, files...)
	return err
}

// egressListeners listens on 127.0.0.1:3128 and on [::1]:3128 (when the
// kernel has IPv6) in the calling thread's network namespace, and returns
// the sockets.
func egressListeners() ([]*os.File, error) {
	_, port, _ := net.SplitHostPort(egressProxyAddr)
	var files []*os.File
	for _, host := range []string{"127.0.0.1", "::1"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			if host == "::1" && (errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.EAFNOSUPPORT)) {
				continue
			}
			closeFiles(files)
			return nil, err
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close()
		if err != nil {
			closeFiles(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// egressAllowFile, in the sandbox's folder, holds the domain allow list
// the helper serves; it reads it again on SIGHUP.
const egressAllowFile = "egress-allow"

// writeAllowFile writes list into the allow list file of the sandbox
// folder dir, in place (a running helper holds it open), and returns the
// file open for reading.
func writeAllowFile(dir, list string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, egressAllowFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	if err := unix.Ftruncate(fd, 0); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([]byte(list), 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readAllowFile reads the allow list from f.
func readAllowFile(f *os.File) (*egress.AllowList, error) {
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		return nil, err
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil {
		return nil, err
	}
	return egress.ParseAllowList(string(b))
}

// applyEgressProxy brings the egress proxy helper of the running sandbox
// m in line with its Config: it tells a
// running helper its new list (SIGHUP), starts one (as root: its
// listening sockets are made in the sandbox's namespace by the host) or
// stops it.
func (s *Sandbox) applyEgressProxy(ctx context.Context, dir string, m *meta) error {
	want, runs := m.Config.DomainAllowList != "", helperRuns(m.EgressProxy)
	switch {
	case want && runs:
		f, err := writeAllowFile(dir, m.Config.DomainAllowList)
		if err != nil {
			return stateDirError(s.opts.StateDir, err)
		}
		f.Close()
		return signalProcess(*m.EgressProxy, unix.SIGHUP)
	case want:
		if m.Network == nil {
			return fmt.Errorf("%w: the egress proxy of a sandbox started without root cannot be started while it runs; stop it and start it again", sandbox.ErrUnsupported)
		}
		sbx, err := openInitNetns(m.Init)
		if err != nil {
			return err
		}
		defer sbx.Close()
		var lns []*os.File
		if err := inNetns(sbx, func() (err error) { lns, err = egressListeners(); return err }); err != nil {
			return fmt.Errorf("egress proxy: listen in the sandbox: %w", err)
		}
		defer closeFiles(lns)
		h, err := s.startEgressProxy(m)
		if err != nil {
			return err
		}
		defer h.close()
		return h.serve(lns)
	case runs:
		stopEgressProxy(ctx, m)
	}
	return nil
}

// signalProcess sends sig to the process r, through a pidfd.
func signalProcess(r initRecord, sig unix.Signal) error {
	pfd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if st, ok := procStartTime(r.PID); !ok || st != r.StartTime {
		return errors.New("the process has ended")
	}
	return unix.PidfdSendSignal(pfd, sig, nil, 0)
}
