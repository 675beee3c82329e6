package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/agentbox-dev/agentbox/internal/egress"
)

// The user-mode network's host process (see usernet.go): this program
// re-executed as "agentbox-usernet", with the user's identity and no
// other privilege (no_new_privs), outside every namespace of the
// sandbox. A short-lived spawn process starts it, so that it is no
// engine's child, and tells the engine its pid once it serves. Its
// descriptors:
//
//	3  the sandbox's TUN device (its only copy)
//	4  a pidfd of the sandbox's init: it exits when the init ends
//	5  the sandbox's usernet policy log file
//	6  (spawn only) the write end of the pipe that reports the pid
//
// Its policy comes in usernetConfigEnv (usernetPolicy as JSON).

// usernetEnv marks a re-executed user-mode network process, with the
// mode usernetSpawn or usernetServe.
const (
	usernetEnv       = "_AGENTBOX_USERNET"
	usernetConfigEnv = "_AGENTBOX_USERNET_POLICY"
	usernetSpawn     = "spawn"
	usernetServe     = "serve"
)

// The process's descriptors.
const (
	usernetFDTun  = 3
	usernetFDInit = 4
	usernetFDLog  = 5
	usernetFDPipe = 6
)

// usernetIdle bounds how long a UDP flow lives without traffic, and
// usernetDialTimeout a connection to a destination.
const (
	usernetIdle        = 60 * time.Second
	usernetDialTimeout = 10 * time.Second
)

// usernetMaxFlows bounds the TCP connections and UDP flows a sandbox's
// user-mode network relays at once (each holds a host socket).
const usernetMaxFlows = 4096

// usernetTooMany is the refusal reason of a flow past usernetMaxFlows.
const usernetTooMany = "too many connections at once (the user-mode network relays 4096)"

// usernetMain runs the user-mode network process when this process is
// one, and exits; otherwise it returns at once.
func usernetMain() {
	mode, ok := os.LookupEnv(usernetEnv)
	if !ok {
		return
	}
	os.Unsetenv(usernetEnv)
	switch mode {
	case usernetSpawn:
		os.Exit(spawnUsernet())
	case usernetServe:
		os.Exit(runUsernet())
	}
	os.Exit(2)
}

// spawnUsernet starts the serving process with descriptors 3 to 5 and
// the write end of a pipe, waits for its pid on that pipe, writes it to
// descriptor 6 and exits: the server is an orphan, reaped by the system.
func spawnUsernet() int {
	r, w, err := os.Pipe()
	if err != nil {
		return 1
	}
	cmd := usernetCommand(usernetServe, os.Getenv(usernetConfigEnv), []*os.File{
		os.NewFile(usernetFDTun, "tun"), os.NewFile(usernetFDInit, "init"), os.NewFile(usernetFDLog, "log"), w,
	})
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start the user-mode network:", err)
		return 1
	}
	w.Close()
	b, _ := io.ReadAll(io.LimitReader(r, 64))
	if string(b) != "ok" {
		fmt.Fprintln(os.Stderr, "the user-mode network did not start:", strings.TrimSpace(string(b)))
		_ = cmd.Process.Kill()
		return 1
	}
	out := os.NewFile(usernetFDPipe, "report")
	_, err = out.WriteString(strconv.Itoa(cmd.Process.Pid))
	if err != nil {
		return 1
	}
	return 0
}

// usernetCommand returns the command of a user-mode network process in
// mode, with its policy and descriptors files.
func usernetCommand(mode, policy string, files []*os.File) *exec.Cmd {
	return &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"agentbox-usernet"},
		Env: []string{
			usernetEnv + "=" + mode, usernetConfigEnv + "=" + policy,
			"GOGC=50", "GODEBUG=madvdontneed=1", "GORACE=atexit_sleep_ms=0",
		},
		ExtraFiles:  files,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		Dir:         "/",
	}
}

// runUsernet serves the TUN device until the init ends.
func runUsernet() int {
	report := os.NewFile(usernetFDPipe, "report")
	fail := func(err error) int {
		_, _ = report.WriteString(err.Error())
		return 1
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(err)
	}
	var p usernetPolicy
	if err := json.Unmarshal([]byte(os.Getenv(usernetConfigEnv)), &p); err != nil {
		return fail(fmt.Errorf("bad policy: %w", err))
	}
	os.Unsetenv(usernetConfigEnv)
	if p.Resolver == "" {
		a, ok := hostResolver(false)
		if !ok {
			a = netip.MustParseAddr("127.0.0.1")
		}
		p.Resolver = netip.AddrPortFrom(a, 53).String()
	}
	ended, _, err := watchExitFD(usernetFDInit)
	if err != nil {
		return fail(err)
	}
	rec := newPolicyRecorder(os.NewFile(usernetFDLog, "log"))
	u := &usernet{policy: p, rec: rec, hosts: &hostNetsCache{}, flows: make(chan struct{}, usernetMaxFlows)}
	closed := make(chan struct{})
	var once sync.Once
	s, err := u.stack(usernetFDTun, func() { once.Do(func() { close(closed) }) })
	if err != nil {
		return fail(err)
	}
	_, _ = report.WriteString("ok")
	report.Close()
	select {
	case <-ended:
	case <-closed:
	}
	s.Close()
	rec.close()
	return 0
}

// watchExitFD returns a channel closed when the process of the pidfd fd
// has ended.
func watchExitFD(fd int) (<-chan struct{}, func(), error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rc.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0 || err != nil && !errors.Is(err, unix.EINTR)
		})
	}()
	return done, func() { f.Close() }, nil
}

// usernet is the state of the user-mode network process.
type usernet struct {
	policy usernetPolicy
	rec    *policyRecorder
	hosts  *hostNetsCache
	// flows holds a token per relayed flow: at usernetMaxFlows a new
	// flow is refused, so that a sandbox cannot spend the process's
	// descriptors.
	flows chan struct{}
}

// takeFlow takes a flow's token, or reports false when usernetMaxFlows
// flows are relayed.
func (u *usernet) takeFlow() bool {
	select {
	case u.flows <- struct{}{}:
		return true
	default:
		return false
	}
}

// endFlow gives a flow's token back.
func (u *usernet) endFlow() { <-u.flows }

// stack makes the TCP/IP stack that serves the TUN device fd; closed is
// called when the device's peer goes away.
func (u *usernet) stack(fd int, closed func()) (*stack.Stack, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	sack := tcpip.TCPSACKEnabled(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	ep, err := fdbased.New(&fdbased.Options{FDs: []int{fd}, MTU: usernetMTU, ClosedFunc: func(tcpip.Error) { closed() }})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("the TUN device: %w", err)
	}
	if terr := s.CreateNIC(1, ep); terr != nil {
		s.Close()
		return nil, fmt.Errorf("the stack's interface: %s", terr)
	}
	s.SetPromiscuousMode(1, true)
	s.SetSpoofing(1, true)
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: 1}})
	tf := tcp.NewForwarder(s, 0, 1024, u.forwardTCP)
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, tf.HandlePacket)
	uf := udp.NewForwarder(s, u.forwardUDP)
	s.SetTransportProtocolHandler(udp.ProtocolNumber, uf.HandlePacket)
	return s, nil
}

// destination returns where a flow to the stack's address dst goes from
// the host (the host's resolver for usernetResolver:53), or why it is
// refused.
func (u *usernet) destination(dst tcpip.Address, port uint16) (string, string) {
	a, _ := netip.AddrFromSlice(dst.AsSlice())
	if a == usernetResolver && port == 53 {
		return u.policy.Resolver, ""
	}
	if why := u.policy.refusal(a, u.hosts.get()); why != "" {
		return "", why
	}
	return netip.AddrPortFrom(a, port).String(), ""
}

// refused records a refused flow to dst.
func (u *usernet) refused(proto string, dst tcpip.Address, port uint16, why string) {
	u.rec.add(egress.Refusal{Time: time.Now().UTC(), Protocol: proto, Host: dst.String(), Port: port, Reason: why})
}

// forwardTCP serves one connection the sandbox opens: refused (reset) by
// the policy or when the destination refuses it, else relayed.
func (u *usernet) forwardTCP(r *tcp.ForwarderRequest) {
	id := r.ID()
	to, why := u.destination(id.LocalAddress, id.LocalPort)
	if why != "" {
		u.refused("tcp", id.LocalAddress, id.LocalPort, why)
		r.Complete(true)
		return
	}
	if !u.takeFlow() {
		u.refused("tcp", id.LocalAddress, id.LocalPort, usernetTooMany)
		r.Complete(true)
		return
	}
	defer u.endFlow()
	up, err := net.DialTimeout("tcp", to, usernetDialTimeout)
	if err != nil {
		r.Complete(true)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		up.Close()
		r.Complete(true)
		return
	}
	r.Complete(false)
	relayTCP(gonet.NewTCPConn(&wq, ep), up.(*net.TCPConn))
}

// halfCloser is a connection whose sending side closes alone.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// relayTCP copies between a and b both ways, passing on half-closes,
// and closes both.
func relayTCP(a, b halfCloser) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, a)
		_ = b.CloseWrite()
	}()
	_, _ = io.Copy(a, b)
	_ = a.CloseWrite()
	wg.Wait()
	a.Close()
	b.Close()
}

// forwardUDP serves the first datagram of a flow the sandbox sends:
// dropped by the policy, else the flow is relayed until idle.
func (u *usernet) forwardUDP(r *udp.ForwarderRequest) {
	id := r.ID()
	to, why := u.destination(id.LocalAddress, id.LocalPort)
	if why != "" {
		u.refused("udp", id.LocalAddress, id.LocalPort, why)
		return
	}
	if !u.takeFlow() {
		u.refused("udp", id.LocalAddress, id.LocalPort, usernetTooMany)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		u.endFlow()
		return
	}
	in := gonet.NewUDPConn(&wq, ep)
	go func() {
		defer u.endFlow()
		defer in.Close()
		up, err := net.DialTimeout("udp", to, usernetDialTimeout)
		if err != nil {
			return
		}
		defer up.Close()
		relayUDP(in, up)
	}()
}

// relayUDP copies datagrams between a and b both ways until neither
// carried one for usernetIdle.
func relayUDP(a, b net.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	copyDatagrams := func(dst, src net.Conn) {
		defer cancel()
		buf := make([]byte, 65536)
		for {
			_ = src.SetReadDeadline(time.Now().Add(usernetIdle))
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go copyDatagrams(b, a)
	go copyDatagrams(a, b)
	<-ctx.Done()
	_ = a.SetReadDeadline(time.Now())
	_ = b.SetReadDeadline(time.Now())
}

// hostNetsCache holds the host's own addresses and networks, read again
// at most every second: a flow to them is refused.
type hostNetsCache struct {
	mu   sync.Mutex
	at   time.Time
	nets []netip.Prefix
}

// get returns the host's addresses (as single-address prefixes) and the
// networks of its interfaces.
func (c *hostNetsCache) get() []netip.Prefix {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < time.Second && c.nets != nil {
		return c.nets
	}
	addrs, _ := net.InterfaceAddrs()
	nets := []netip.Prefix{}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ones, _ := ipn.Mask.Size()
		ip = ip.Unmap()
		nets = append(nets, netip.PrefixFrom(ip, ip.BitLen()), netip.PrefixFrom(ip, ones).Masked())
	}
	c.nets, c.at = nets, time.Now()
	return nets
}
