package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The netsock process of a sandbox in the secrets' redirect mode
// (redirect_linux.go): the upstream connections of the sandbox's egress
// proxy must leave from the sandbox's network namespace, through its own
// firewall, so that no policy is re-implemented; but the shared egress
// proxy (uid 65534, no capabilities) cannot enter a namespace. So the
// engine starts, per such sandbox, this program re-executed as
// "agentbox-netsock" from a throwaway thread that entered the sandbox's
// network namespace (the child inherits the thread's), as uid and gid
// 65534, no_new_privs, no capabilities, in no other namespace of the
// sandbox. Its descriptors:
//
//	3  one end of a socketpair (SOCK_SEQPACKET), whose other end the
//	   egress proxy holds
//	4  a pidfd of the sandbox's init
//
// It answers each one-byte request ('4' or '6') with a new unconnected
// TCP socket of that family (SOCK_NONBLOCK|SOCK_CLOEXEC) by SCM_RIGHTS,
// and exits when the socketpair closes or the init ends. Its sockets are
// 65534's (meta skuid): the redirect table lets them pass.

// netsockEnv marks a re-executed netsock process.
const netsockEnv = "_AGENTBOX_NETSOCK"

// The netsock process's descriptors.
const (
	netsockFDConn = 3
	netsockFDInit = 4
)

// netsockMain runs the netsock process when this process is one, and
// exits; otherwise it returns at once.
func netsockMain() {
	if _, ok := os.LookupEnv(netsockEnv); !ok {
		return
	}
	os.Unsetenv(netsockEnv)
	os.Exit(runNetsock())
}

// runNetsock answers the requests on its socketpair until it closes or
// the init ends.
func runNetsock() int {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 1
	}
	fds := []unix.PollFd{{Fd: netsockFDConn, Events: unix.POLLIN}, {Fd: netsockFDInit, Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return 1
		}
		if fds[1].Revents != 0 {
			return 0 // the init ended
		}
		if !answerNetsock() {
			return 0
		}
	}
}

// answerNetsock answers one request; false when the socketpair closed
// (the proxy forgot the sandbox).
func answerNetsock() bool {
	var req [1]byte
	n, err := unix.Read(netsockFDConn, req[:])
	if n <= 0 || err != nil {
		return errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN)
	}
	fam := unix.AF_INET
	if req[0] == '6' {
		fam = unix.AF_INET6
	}
	s, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return unix.Sendmsg(netsockFDConn, []byte{'e'}, nil, nil, 0) == nil
	}
	defer unix.Close(s)
	return unix.Sendmsg(netsockFDConn, []byte{'k'}, unix.UnixRights(s), nil, 0) == nil
}

// startNetsock starts the netsock process of the running sandbox whose
// init is r and whose network namespace is sbx, and returns the egress
// proxy's end of its socketpair.
func startNetsock(sbx *os.File, r *initRecord) (*os.File, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("secrets redirect: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "netsock"), os.NewFile(uintptr(pair[1]), "netsock")
	defer theirs.Close()
	pfd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("secrets redirect: the sandbox's init: %w", err)
	}
	pidf := os.NewFile(uintptr(pfd), "init")
	defer pidf.Close()
	if st, ok := procStartTime(r.PID); !ok || st != r.StartTime {
		mine.Close()
		return nil, errors.New("secrets redirect: the sandbox's init has ended")
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"agentbox-netsock"},
		Env:        []string{netsockEnv + "=1", "GOMAXPROCS=1", "GORACE=atexit_sleep_ms=0"},
		ExtraFiles: []*os.File{theirs, pidf},
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:     true,
			Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}},
		},
		Dir: "/",
	}
	// The child is forked by the thread that entered the namespace.
	if err := inNetns(sbx, cmd.Start); err != nil {
		mine.Close()
		return nil, fmt.Errorf("secrets redirect: start the sandbox's socket helper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return mine, nil
}

// netsockDialTimeout bounds a connection through a netsock process.
const netsockDialTimeout = 10 * time.Second

// netsockDialer makes the egress proxy's upstream connections of a
// sandbox with sockets from its netsock process.
type netsockDialer struct {
	mu   sync.Mutex // one request at a time
	conn *net.UnixConn
}

// newNetsockDialer returns the dialer over the socketpair end f (which
// it duplicates).
func newNetsockDialer(f *os.File) (*netsockDialer, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("secrets redirect: the socket helper's descriptor is not a unix socket")
	}
	return &netsockDialer{conn: uc}, nil
}

// close ends the socketpair: the netsock process exits.
func (d *netsockDialer) close() { d.conn.Close() }

// socket returns a new unconnected TCP socket of the family of v6 from
// the netsock process, checked.
func (d *netsockDialer) socket(v6 bool) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	req, fam := []byte{'4'}, unix.AF_INET
	if v6 {
		req, fam = []byte{'6'}, unix.AF_INET6
	}
	_ = d.conn.SetDeadline(time.Now().Add(netsockDialTimeout))
	if _, err := d.conn.Write(req); err != nil {
		return -1, fmt.Errorf("secrets redirect: the socket helper: %w", err)
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := d.conn.ReadMsgUnix(buf, oob)
	if err != nil || n != 1 {
		return -1, fmt.Errorf("secrets redirect: the socket helper did not answer: %v", err)
	}
	fds, _ := receivedFDs(oob[:oobn])
	if buf[0] != 'k' || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, errors.New("secrets redirect: the socket helper made no socket")
	}
	if err := checkUpstreamSocket(fds[0], fam); err != nil {
		unix.Close(fds[0])
		return -1, err
	}
	return fds[0], nil
}

// checkUpstreamSocket checks that fd is an unconnected TCP socket of
// family fam, and makes it non-blocking.
func checkUpstreamSocket(fd, fam int) error {
	want := map[int]int{unix.SO_DOMAIN: fam, unix.SO_TYPE: unix.SOCK_STREAM, unix.SO_PROTOCOL: unix.IPPROTO_TCP, unix.SO_ACCEPTCONN: 0}
	for opt, v := range want {
		if got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt); err != nil || got != v {
			return fmt.Errorf("secrets redirect: the socket helper's socket is not an unconnected TCP socket (option %d: %d)", opt, got)
		}
	}
	if _, err := unix.Getpeername(fd); !errors.Is(err, unix.ENOTCONN) {
		return errors.New("secrets redirect: the socket helper's socket is already connected")
	}
	return unix.SetNonblock(fd, true)
}

// dial connects to addr from the sandbox's network namespace, through
// its firewall, within ctx and netsockDialTimeout.
func (d *netsockDialer) dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	fd, err := d.socket(addr.Addr().Is6())
	if err != nil {
		return nil, err
	}
	var sa unix.Sockaddr
	if addr.Addr().Is6() {
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	}
	if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	f := os.NewFile(uintptr(fd), "upstream") // non-blocking: the runtime's poller waits
	defer f.Close()
	deadline := time.Now().Add(netsockDialTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = f.SetWriteDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Now()) })
	defer stop()
	if err := waitConnected(f); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return net.FileConn(f)
}

// waitConnected waits until the connect of the socket f ends, and returns
// its outcome.
func waitConnected(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var soErr error
	werr := rc.Write(func(fd uintptr) bool {
		v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			soErr = err
		case v != 0:
			soErr = unix.Errno(v)
		default:
			if _, err := unix.Getpeername(int(fd)); errors.Is(err, unix.ENOTCONN) {
				return false // still connecting
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return soErr
}
