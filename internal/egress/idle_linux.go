package egress

import (
	"net"

	"golang.org/x/sys/unix"
)

// movedBytes returns how many bytes the TCP connection c has received and
// had acknowledged, from the kernel's counters: the proxy's copies use
// splice(2), so it never counts them itself.
func movedBytes(c net.Conn) (uint64, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return 0, false
	}
	return info.Bytes_acked + info.Bytes_received, true
}
