//go:build linux

package local_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// Network probes, run inside sandboxes by escape_probe_test.go's
// mechanism; each answers "ok" or the errno the kernel gave (a refusal by
// the sandbox's firewall is ECONNREFUSED for TCP, a reset; EHOSTUNREACH
// or EACCES for UDP, an ICMP error), or ETIMEDOUT when nothing came back.
func init() {
	for name, p := range map[string]func(args []string) error{
		// tcp ADDR:PORT: connect and read the lab's greeting, which must
		// name the address dialled (the right server answered).
		"tcp": func(args []string) error { return probeGreeting(args[0]) },
		// dns ADDR: one query for public.test to ADDR:53 over UDP.
		"dns": func(args []string) error { return probeDNS(args[0]) },
		// resolve NAME: the sandbox's resolver (its resolv.conf) must
		// answer NAME with labPublic4.
		"resolve": func(args []string) error { return probeResolve(args[0]) },
		// listen ADDR:PORT: listen, print "listening", serve greetings
		// until killed.
		"listen": func(args []string) error { return probeListen(args[0]) },
		// hold ADDR:PORT: connect, then send a line every 100ms and read
		// its echo, printing "up" once; end with the first error.
		"hold": func(args []string) error { return probeHold(args[0]) },
		// raw sockets and ICMP.
		"raw_socket": func([]string) error {
			return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP))
		},
		"packet_socket": func([]string) error {
			return closeFD(unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0))
		},
		"ping_socket": func([]string) error {
			return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP))
		},
		// netlink_addr: add an address to eth0 (CAP_NET_ADMIN over the
		// namespace).
		"netlink_addr": func([]string) error { return probeAddAddress() },
	} {
		escapeProbes[name] = p
	}
}

// errnoOf returns the errno err wraps, a timeout as ETIMEDOUT, or err.
func errnoOf(err error) error {
	var errno unix.Errno
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return unix.ETIMEDOUT
	}
	return err
}

func probeGreeting(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return errnoOf(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return errnoOf(err)
	}
	host, _, _ := net.SplitHostPort(addr)
	if want := "hello from " + strings.Trim(host, "[]"); strings.TrimSpace(line) != want {
		return fmt.Errorf("greeting %q, want %q", line, want)
	}
	return nil
}

func dnsQuery(name string) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x4242, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	msg, _ := b.Finish()
	return msg
}

func probeDNS(addr string) error {
	c, err := net.Dial("udp", net.JoinHostPort(addr, "53"))
	if err != nil {
		return errnoOf(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write(dnsQuery("public.test.")); err != nil {
		return errnoOf(err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return errnoOf(err)
	}
	var p dnsmessage.Parser
	if _, err := p.Start(buf[:n]); err != nil {
		return err
	}
	_ = p.SkipAllQuestions()
	a, err := p.AnswerHeader()
	if err != nil || a.Type != dnsmessage.TypeA {
		return fmt.Errorf("no A answer: %v", err)
	}
	r, err := p.AResource()
	if err != nil || netip.AddrFrom4(r.A) != labPublic4 {
		return fmt.Errorf("answer %v, %v", r.A, err)
	}
	return nil
}

func probeResolve(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := &net.Resolver{PreferGo: true}
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsTimeout {
			return unix.ETIMEDOUT
		}
		if errno, ok := errnoOf(err).(unix.Errno); ok {
			return errno
		}
		// The resolver's errors keep only the text of the system call's.
		for _, e := range []unix.Errno{unix.ENETUNREACH, unix.EHOSTUNREACH, unix.ECONNREFUSED, unix.EACCES} {
			if strings.Contains(err.Error(), e.Error()) {
				return e
			}
		}
		return fmt.Errorf("lookup: %v", err)
	}
	for _, a := range addrs {
		if a == labPublic4.String() {
			return nil
		}
	}
	return fmt.Errorf("%s resolves to %v", name, addrs)
}

func probeListen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errnoOf(err)
	}
	fmt.Println("listening")
	serveGreeting(ln)
	return nil
}

func probeHold(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return errnoOf(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err != nil {
		return errnoOf(err)
	}
	fmt.Println("up")
	for {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return errnoOf(err)
		}
		if _, err := r.ReadString('\n'); err != nil {
			return errnoOf(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func probeAddAddress() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifi, err := net.InterfaceByName("eth0")
	if err != nil {
		ifi, err = net.InterfaceByName("lo")
		if err != nil {
			return err
		}
	}
	// RTM_NEWADDR 192.0.2.99/32 on the interface: nlmsghdr, ifaddrmsg,
	// IFA_LOCAL.
	ne := binary.NativeEndian
	msg := make([]byte, 16+8+8)
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.RTM_NEWADDR)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	ne.PutUint32(msg[8:], 1)
	msg[16], msg[17] = unix.AF_INET, 32
	ne.PutUint32(msg[20:], uint32(ifi.Index))
	ne.PutUint16(msg[24:], 8)
	ne.PutUint16(msg[26:], unix.IFA_LOCAL)
	copy(msg[28:], []byte{192, 0, 2, 99})
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 {
		return fmt.Errorf("netlink answer: %v", err)
	}
	return nlError(msgs[0])
}
