package local

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/egress"
)

// watchExit returns a channel closed when the process pid, started at
// start (/proc/<pid>/stat field 22), has ended (closed at once when it
// already has), or when stop is called.
func watchExit(pid int, start uint64) (ended <-chan struct{}, stop func(), err error) {
	done := make(chan struct{})
	pfd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		close(done)
		return done, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if st, ok := procStartTime(pid); !ok || st != start {
		unix.Close(pfd)
		close(done)
		return done, func() {}, nil
	}
	// The pidfd is non-blocking, so the runtime's poller waits for it to
	// become readable (the process ended): no thread blocks. Closing it
	// ends the wait.
	f := os.NewFile(uintptr(pfd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	go func() {
		defer close(done)
		_ = rc.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0 || err != nil && !errors.Is(err, unix.EINTR)
		})
	}()
	var once sync.Once
	return done, func() { once.Do(func() { f.Close() }) }, nil
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
// (egressListeners) for the host to hand to the egress proxy, and keeps a
// descriptor of each for as long as it lives, whose numbers it tells the
// host (cfg.egressFDs): the sockets outlive a proxy that dies, and the
// host takes them again from the init (pidfd_getfd) for the next one.
func listenForEgress(cfg *initConfig) error {
	if !cfg.hasDomains() {
		return nil
	}
	files, err := egressListeners()
	cfg.handOver = append(cfg.handOver, files...)
	if err != nil {
		return err
	}
	for _, f := range files {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return err
		}
		cfg.egressFDs = append(cfg.egressFDs, fd)
	}
	return nil
}

// egressListeners listens on 127.0.0.1:3128 and on [::1]:3128 (when the
// kernel has IPv6) in the calling thread's network namespace, and returns
// the sockets.
func egressListeners() ([]*os.File, error) {
	_, port, _ := net.SplitHostPort(egressProxyAddr)
	return loopbackListeners(port)
}

// loopbackListeners listens on 127.0.0.1:port and on [::1]:port (when
// the kernel has IPv6) in the calling thread's network namespace, and
// returns the sockets.
func loopbackListeners(port string) ([]*os.File, error) {
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
