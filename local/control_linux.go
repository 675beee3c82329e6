package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The control socket joins the host process that launches an init and the
// init (SOCK_SEQPACKET, the init's fd 3). The host sends one message: the
// initConfig as JSON, with the descriptors it names; the init answers "ok"
// once it serves, with the descriptors it hands over (the egress proxy's
// listening sockets, made in the sandbox's network namespace; the "ok"
// then names the init's own descriptors of them: "ok egress=7,8"), or an
// error message, and closes its end.

// fdControl is the init's end of the control socket.
const fdControl = 3

// initConfig is what the host tells the init: the sandbox's Config as
// stored in its metadata, and what the init cannot derive from it.
type initConfig struct {
	// Config is the sandbox's shape; the init derives the rest from it
	// (home, hostname, environment).
	Config
	ID string `json:"id"`
	// Binds are the folders of the state dir and the volumes, in the order
	// prepare made them.
	Binds []bindSpec `json:"binds"`
	// ExitFD and ActivityFD, when >= 0, index the descriptors: detached
	// mounts of the host's files of the init's exit record and activity
	// stamp, each of that one file (see stampFiles); otherwise both are
	// in the toolbox's folder.
	ExitFD     int `json:"exitFD"`
	ActivityFD int `json:"activityFD"`
	// CommandCgroupFDs index the descriptors: the files through which the
	// thread that starts commands joins their cgroups (joinCommandCgroups).
	CommandCgroupFDs []int `json:"commandCgroupFDs,omitempty"`
	// MetricsCgroupFDs index the descriptors: the sandbox's cgroup folders
	// (O_PATH), whose limits and use the toolbox's GET /system/metrics
	// reports (the sandbox has no cgroup file system of its own).
	MetricsCgroupFDs []int `json:"metricsCgroupFDs,omitempty"`
	// Net is what the init does about its network.
	Net initNet `json:"net"`
	// RootFD, when >= 0, indexes the descriptors: the sandbox's writable
	// root (mountRoot), made of the image Root.
	RootFD int         `json:"rootFD"`
	Root   *rootRecord `json:"root,omitempty"`
	// FUSEDev, with Confinement.AllowFUSE, is the node the init binds at
	// /dev/fuse (fuseDevice).
	FUSEDev *bindSpec `json:"fuseDev,omitempty"`
	// RunAs is the user commands run as (the image's USER); nil: the
	// sandbox's root.
	RunAs *runAs `json:"runAs,omitempty"`

	// handOver are the descriptors the init sends the host with its "ok":
	// the egress proxy's listening sockets, then the user-mode network's
	// TUN device (Net.Tun).
	handOver []*os.File
	// tun is the TUN device between openTun and tunUp.
	tun *os.File
	// egressFDs are the init's own descriptors of the egress proxy's
	// listening sockets, which it names in its "ok" (listenForEgress).
	egressFDs []int
}

// bindSpec binds a host folder at Target.
type bindSpec struct {
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// FD, when >= 0, indexes the descriptors sent with the configuration:
	// a detached mount (open_tree) to move in place. Otherwise Path is
	// opened by the init itself before it hides the host's /tmp.
	FD   int    `json:"fd"`
	Path string `json:"path,omitempty"`
}

// newInitConfig returns the init configuration of the sandbox id shaped by
// c, without binds: the one place where a Config becomes what the init is
// told.
func newInitConfig(id string, c Config) *initConfig {
	return &initConfig{Config: c, ID: id, ExitFD: -1, ActivityFD: -1, RootFD: -1}
}

// hostname returns the sandbox's host name: its id, cut to the 63 bytes a
// host name may hold.
func (cfg *initConfig) hostname() string { return cfg.ID[:min(len(cfg.ID), 63)] }

// env returns the environment of the toolbox server and of every command.
func (cfg *initConfig) env() []string {
	home, user := cfg.userHome(), cfg.User
	if cfg.RunAs != nil {
		user = cfg.RunAs.Name
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home, "USER=" + user, "LOGNAME=" + user,
		"SHELL=/bin/bash", "LANG=C.UTF-8", "TERM=xterm-256color",
		"HOSTNAME=" + cfg.hostname(), "TMPDIR=" + sandboxTmp,
	}
	return append(cfg.Root.imageEnv(env), egressEnv(&cfg.Config)...)
}

// userHome is the HOME of commands: the image user's home from its
// passwd entry, else the sandbox's home.
func (cfg *initConfig) userHome() string {
	if cfg.RunAs != nil {
		return cfg.RunAs.Home
	}
	return cfg.home()
}

// credential is who commands run as: nil for the sandbox's root.
func (cfg *initConfig) credential() *syscall.Credential {
	u := cfg.RunAs
	if u == nil {
		return nil
	}
	c := &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}
	for _, g := range u.Groups {
		c.Groups = append(c.Groups, uint32(g))
	}
	return c
}

// sendConfig sends cfg and files (the descriptors its binds name) to the
// init through its control socket ctl.
func sendConfig(ctl *os.File, cfg *initConfig, files []*os.File) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	rights := make([]int, len(files))
	for i, f := range files {
		rights[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(int(ctl.Fd()), b, unix.UnixRights(rights...), nil, 0); err != nil {
		return fmt.Errorf("start sandbox init: send configuration: %w", err)
	}
	return nil
}

// receiveConfig reads the host's one message. The descriptors arrive
// close-on-exec; the first is the toolbox socket.
func receiveConfig(ctl *os.File) (*initConfig, []int, error) {
	buf := make([]byte, 1<<16)
	oob := make([]byte, unix.CmsgSpace(64*4))
	n, oobn, _, _, err := unix.Recvmsg(int(ctl.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("read configuration: %w", err)
	}
	if n == 0 {
		return nil, nil, errors.New("the host went away before the sandbox started")
	}
	fds, err := receivedFDs(oob[:oobn])
	if err != nil {
		return nil, nil, err
	}
	var cfg initConfig
	if err := json.Unmarshal(buf[:n], &cfg); err != nil {
		return nil, nil, fmt.Errorf("bad init configuration: %w", err)
	}
	if len(fds) == 0 {
		return nil, nil, errors.New("no toolbox socket received")
	}
	for _, i := range slices.Concat([]int{cfg.ExitFD, cfg.ActivityFD}, cfg.CommandCgroupFDs, cfg.MetricsCgroupFDs, bindFDs(cfg.Binds)) {
		if i >= len(fds) {
			return nil, nil, errors.New("bad init configuration: missing descriptor")
		}
	}
	return &cfg, fds, nil
}

// bindFDs returns the descriptor indexes of binds.
func bindFDs(binds []bindSpec) []int {
	out := make([]int, len(binds))
	for i, b := range binds {
		out[i] = b.FD
	}
	return out
}

// receivedFDs returns the descriptors of the control messages oob.
func receivedFDs(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, err
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

// sendReady tells the host that the init serves, naming egressFDs and
// handing it files (which it closes).
func sendReady(ctl *os.File, egressFDs []int, files []*os.File) {
	text := "ok"
	if len(egressFDs) > 0 {
		nums := make([]string, len(egressFDs))
		for i, fd := range egressFDs {
			nums[i] = strconv.Itoa(fd)
		}
		text += " egress=" + strings.Join(nums, ",")
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = unix.Sendmsg(int(ctl.Fd()), []byte(text), oob, nil, 0)
	closeFiles(files)
}

// initAnswer is the init's answer on its control socket.
type initAnswer struct {
	text  string // "ok", or why the init failed
	files []*os.File
	// egressFDs are the init's descriptors of the egress proxy's
	// listening sockets.
	egressFDs []int
}

// receiveAnswer reads the init's answer; an empty text means it died
// without one.
func receiveAnswer(ctl *os.File) initAnswer {
	b := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(8*4))
	n, oobn, _, _, err := unix.Recvmsg(int(ctl.Fd()), b, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return initAnswer{}
	}
	a := initAnswer{text: string(b[:n])}
	if list, ok := strings.CutPrefix(a.text, "ok egress="); ok {
		a.text = "ok"
		for _, f := range strings.Split(list, ",") {
			if fd, err := strconv.Atoi(f); err == nil {
				a.egressFDs = append(a.egressFDs, fd)
			}
		}
	}
	fds, _ := receivedFDs(oob[:oobn])
	for _, fd := range fds {
		a.files = append(a.files, os.NewFile(uintptr(fd), "handed-over"))
	}
	return a
}

// initError is the error of an init that answered s instead of "ok".
func initError(s string) error {
	if s == "" {
		s = "the init exited before it was ready"
	}
	if strings.Contains(s, "operation not permitted") || strings.Contains(s, "permission denied") {
		return fmt.Errorf("%w: sandbox init: %s", sandbox.ErrIsolationUnavailable, s)
	}
	return fmt.Errorf("sandbox init: %s", s)
}
