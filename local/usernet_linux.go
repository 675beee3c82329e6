package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The user-mode network (usernet.go): the init's side, which makes the
// TUN device, and the engine's, which starts and stops the host process
// of usernetd_linux.go.

// usesUserNet reports whether a sandbox of c started by this process gets
// the user-mode network: without root, in the public and allowList
// modes.
func usesUserNet(c *Config) bool { return !hostMakesNetns() && c.needsInterface() }

// tunUsable returns why this process may not open /dev/net/tun, which
// the init of a sandbox with the user-mode network opens, or nil.
func tunUsable() error {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/net/tun: %w", err)
	}
	unix.Close(fd)
	return nil
}

// openTun runs in the init, in the network namespace it made, before
// pivot_root (it opens the host's /dev/net/tun): it makes the TUN device
// usernetIface and keeps its descriptor for the host (cfg.handOver).
func openTun(cfg *initConfig) error {
	if !cfg.Net.Tun {
		return nil
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/net/tun (the user-mode network needs it readable and writable by the user, mode 0666 as most systems have it): %w", err)
	}
	ifr, err := unix.NewIfreq(usernetIface)
	if err == nil {
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("make the TUN device: %w", err)
	}
	cfg.tun = os.NewFile(uintptr(fd), "tun")
	return nil
}

// tunUp runs in the init once the TUN device exists: it gives it its
// address, MTU and default route, and queues its descriptor for the host
// (the init keeps none once it sent it).
func tunUp(cfg *initConfig) error {
	if cfg.tun == nil {
		return nil
	}
	link, err := netlink.LinkByName(usernetIface)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: usernetPrefix.Addr().AsSlice(), Mask: net.CIDRMask(usernetPrefix.Bits(), 32)}}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("address of %s: %w", usernetIface, err)
	}
	if err := netlink.LinkSetMTU(link, usernetMTU); err != nil {
		return fmt.Errorf("MTU of %s: %w", usernetIface, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bring %s up: %w", usernetIface, err)
	}
	route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: usernetGateway.AsSlice()}
	if err := netlink.RouteAdd(route); err != nil {
		return fmt.Errorf("default route via %s: %w", usernetIface, err)
	}
	cfg.handOver = append(cfg.handOver, cfg.tun)
	cfg.tun = nil
	return nil
}

// startUserNet starts the host process of the user-mode network of the
// sandbox m of folder dir, serving tun (which the caller closes), and
// records it in m.
func (s *Sandbox) startUserNet(ctx context.Context, dir string, m *meta, tun *os.File) error {
	if tun == nil {
		return nil
	}
	r := m.Init
	pfd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return fmt.Errorf("user-mode network: the sandbox's init: %w", err)
	}
	pidf := os.NewFile(uintptr(pfd), "init")
	defer pidf.Close()
	logf, err := os.OpenFile(filepath.Join(dir, usernetLogFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("user-mode network: policy log: %w", err)
	}
	defer logf.Close()
	policy, _ := json.Marshal(usernetPolicyOf(&m.Config, s.netTest))
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd := usernetCommand(usernetSpawn, string(policy), []*os.File{tun, pidf, logf, pw})
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return fmt.Errorf("user-mode network: %w", err)
	}
	b, _ := io.ReadAll(io.LimitReader(pr, 32))
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("user-mode network: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("user-mode network: no pid reported: %s", strings.TrimSpace(stderr.String()))
	}
	st, _ := procStartTime(pid)
	m.UserNet = &usernetRecord{PID: pid, StartTime: st}
	if err := writeMeta(dir, m); err != nil {
		return stateDirError(s.opts.StateDir, err)
	}
	return ctx.Err()
}

// stopUserNet ends the host process of the user-mode network of m (it
// ends by itself with the init; this waits for it, and kills it when it
// lingers).
func stopUserNet(ctx context.Context, m *meta) {
	r := m.UserNet
	m.UserNet = nil
	if r == nil {
		return
	}
	pfd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return
	}
	defer unix.Close(pfd)
	if st, ok := procStartTime(r.PID); !ok || st != r.StartTime {
		return
	}
	if !waitPidfd(ctx, pfd, 2*time.Second) {
		_ = unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
		waitPidfd(ctx, pfd, 2*time.Second)
	}
}

// usernetAlive reports whether the host process of r runs.
func usernetAlive(r *usernetRecord) bool {
	st, ok := procStartTime(r.PID)
	return ok && st == r.StartTime
}

// addUserNetState adds to n what the user-mode network of the running
// sandbox m of folder dir did: its refusals, and the note of its limits.
func addUserNetState(dir string, m *meta, n *sandbox.NetworkInfo) {
	if m.UserNet == nil {
		return
	}
	n.Note = joinNote(n.Note, usernetNote)
	if m.alive() && !usernetAlive(m.UserNet) {
		n.Note = joinNote(n.Note, "the user-mode network's host process is not running: restart the sandbox")
	}
	f, err := os.OpenFile(filepath.Join(dir, usernetLogFile), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	l, err := readPolicyLogFile(f)
	if err != nil && !errors.Is(err, io.EOF) {
		return
	}
	n.RefusedConnections += l.Total
	for _, r := range l.Refusals {
		n.PolicyLog = append(n.PolicyLog, sandbox.NetworkRefusal{Time: r.Time, Protocol: r.Protocol, Host: r.Host, Port: int(r.Port), Reason: r.Reason})
	}
}
