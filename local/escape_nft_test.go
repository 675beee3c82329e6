//go:build linux

package local_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// nf_tables over raw netlink, enough for the escape probes: create a table
// and list the tables of the current network namespace. Reaching
// nf_tables as root of a nested user and network namespace is the way in
// of many kernel exploits.

// nftNested runs the probe nft_create_here (this binary) as root of a new
// user and network namespace, and returns its failure: the error of
// creating the namespaces, or what the probe printed when it was not "ok".
func nftNested(table string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "nft_create_here", table)
	cmd.Env = []string{probeEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "ok" {
		return fmt.Errorf("in the nested namespaces: %s", s)
	}
	return nil
}

// nftTableBatch sends, in one batch, the table message msg (with flags)
// for the inet table name in the current network namespace, and returns
// its answer.
func nftTableBatch(msg, flags uint16, name string) error {
	fd, err := nftSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	const seq = 2
	var b []byte
	b = nlMessage(b, unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, seq-1, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)
	b = nlMessage(b, unix.NFNL_SUBSYS_NFTABLES<<8|msg, unix.NLM_F_REQUEST|flags|unix.NLM_F_ACK,
		seq, unix.NFPROTO_INET, 0, nlStringAttr(unix.NFTA_TABLE_NAME, name))
	b = nlMessage(b, unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, seq+1, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	// A refused batch (EPERM) is answered on its first message.
	return nlReceive(fd, func(m syscall.NetlinkMessage) (bool, error) {
		if m.Header.Type != unix.NLMSG_ERROR || m.Header.Seq < seq-1 || m.Header.Seq > seq+1 {
			return false, nil
		}
		err := nlError(m)
		return err != nil || m.Header.Seq == seq, err
	})
}

// nftCreateTable creates the inet table name in the current network
// namespace and checks that it is listed there.
func nftCreateTable(name string) error {
	if err := nftTableBatch(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, name); err != nil {
		return err
	}
	tables, err := nftTables()
	if err != nil {
		return fmt.Errorf("listing: %w", err)
	}
	if !slices.Contains(tables, name) {
		return fmt.Errorf("table %s created but not listed in %q", name, tables)
	}
	return nil
}

// nftTables lists the names of the nf_tables tables of the current network
// namespace (which takes CAP_NET_ADMIN there).
func nftTables() ([]string, error) {
	fd, err := nftSocket()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	req := nlMessage(nil, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETTABLE, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, 1, unix.NFPROTO_UNSPEC, 0, nil)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var names []string
	err = nlReceive(fd, func(m syscall.NetlinkMessage) (bool, error) {
		switch m.Header.Type {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			return true, nlError(m)
		}
		// nfgenmsg, then the attributes.
		for a := m.Data[min(4, len(m.Data)):]; len(a) >= 4; {
			l := int(binary.NativeEndian.Uint16(a))
			if l < 4 || l > len(a) {
				break
			}
			if binary.NativeEndian.Uint16(a[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER) == unix.NFTA_TABLE_NAME {
				names = append(names, strings.TrimRight(string(a[4:l]), "\x00"))
			}
			a = a[min((l+3)&^3, len(a)):]
		}
		return false, nil
	})
	return names, err
}

func nftSocket() (int, error) {
	return unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
}

// nlMessage appends to b a netfilter netlink message: header, nfgenmsg
// (family, version 0, resID big-endian) and attrs.
func nlMessage(b []byte, typ, flags uint16, seq uint32, family uint8, resID uint16, attrs []byte) []byte {
	h := make([]byte, unix.NLMSG_HDRLEN+4)
	binary.NativeEndian.PutUint32(h[0:], uint32(len(h)+len(attrs)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], seq)
	h[unix.NLMSG_HDRLEN] = family
	binary.BigEndian.PutUint16(h[unix.NLMSG_HDRLEN+2:], resID)
	return append(append(b, h...), attrs...)
}

// nlStringAttr returns a NUL-terminated string attribute, padded.
func nlStringAttr(typ uint16, s string) []byte {
	l := 4 + len(s) + 1
	a := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(a[0:], uint16(l))
	binary.NativeEndian.PutUint16(a[2:], typ)
	copy(a[4:], s)
	return a
}

// nlReceive reads messages from fd and passes them to f until f reports
// it is done.
func nlReceive(fd int, f func(syscall.NetlinkMessage) (bool, error)) error {
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if done, err := f(m); done || err != nil {
				return err
			}
		}
	}
}

// nlError returns the errno of an NLMSG_ERROR message (nil for an ack).
func nlError(m syscall.NetlinkMessage) error {
	if len(m.Data) < 4 {
		return errors.New("short netlink error message")
	}
	if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
		return syscall.Errno(-e)
	}
	return nil
}
