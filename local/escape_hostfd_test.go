//go:build linux

package local_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/mountinfo"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local"
)

// mountIDs returns the mount ids of the mount namespace of pid.
func mountIDs(t *testing.T, pid string) map[string]bool {
	t.Helper()
	ms, err := mountinfo.Read(filepath.Join("/proc", pid, "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range ms {
		ids[strconv.FormatUint(m.ID, 10)] = true
	}
	return ids
}

// fdInfo returns the field key of the fdinfo of the descriptor fd of pid.
func fdInfo(pid, fd, key string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "fdinfo", fd))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in the fdinfo of %s", key, fd)
}

// topOf walks ".." from the folder dirFD until it stays, and returns the
// device and inode where it stayed.
func topOf(dirFD int) (unix.Stat_t, error) {
	fd, err := unix.Dup(dirFD)
	if err != nil {
		return unix.Stat_t{}, err
	}
	defer func() { unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, err
	}
	for range 256 {
		up, err := unix.Openat(fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return st, err
		}
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil {
			unix.Close(up)
			return st, err
		}
		unix.Close(fd)
		fd = up
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			return st, nil
		}
		st = ust
	}
	return st, fmt.Errorf("\"..\" never stays")
}

// TestInitHoldsNoHostDescriptor: no descriptor the sandbox's init holds
// leads outside the sandbox. The init resolves paths the sandbox makes
// (a symlink to /proc/self/fd/N/../..), so a descriptor of a host folder
// would be a way out (CVE-2024-21626); every descriptor it holds is on a
// mount of the sandbox's mount namespace, a detached mount or the kernel's
// internal ones (sockets, pipes), walking ".." from a folder never reaches
// the host's root, and none but its standard ones is inherited by a
// command (close-on-exec).
func TestInitHoldsNoHostDescriptor(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name string
		cfg  local.Config
	}{
		{"default", local.Config{}},
		{"volume and FUSE", local.Config{
			Volumes:     []local.Volume{{Name: "vol", MountPath: "/data"}},
			Confinement: local.Confinement{AllowFUSE: local.FUSEAvailable()},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkInitDescriptors(t, tc.cfg) })
	}
}

// checkInitDescriptors starts a sandbox shaped by cfg and checks the
// descriptors of its init (TestInitHoldsNoHostDescriptor).
func checkInitDescriptors(t *testing.T, cfg local.Config) {
	sb := newSandbox(t, local.Options{Config: cfg})
	// Use the routes that open files: metrics, commands, activity.
	mustRun(t, sb, "true")
	if _, err := sb.Client().SystemMetrics(t.Context()); err != nil {
		t.Fatalf("metrics: %v", err)
	}
	pid := strconv.Itoa(local.InitPID(sb))
	var root unix.Stat_t
	if err := unix.Stat("/", &root); err != nil {
		t.Fatal(err)
	}
	host := mountIDs(t, "self")
	own := mountIDs(t, pid)
	ents, err := os.ReadDir(filepath.Join("/proc", pid, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range ents {
		fd := e.Name()
		link, _ := os.Readlink(filepath.Join("/proc", pid, "fd", fd))
		if n, _ := strconv.Atoi(fd); n > 2 {
			// No command may inherit a descriptor of the init's.
			flags, err := fdInfo(pid, fd, "flags")
			v, perr := strconv.ParseUint(flags, 8, 64)
			if err != nil || perr != nil {
				t.Errorf("fd %s -> %s: flags %q: %v %v", fd, link, flags, err, perr)
			} else if v&unix.O_CLOEXEC == 0 {
				t.Errorf("the init's fd %s -> %s is not close-on-exec (flags %s)", fd, link, flags)
			}
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join("/proc", pid, "fd", fd), &st); err != nil {
			t.Logf("fd %s -> %s: %v", fd, link, err)
			continue
		}
		// Every descriptor, also a device (its standard input), a socket
		// or a pipe (on the kernel's internal mounts).
		mnt, err := fdInfo(pid, fd, "mnt_id")
		if err != nil {
			t.Errorf("fd %s -> %s: %v", fd, link, err)
			continue
		}
		t.Logf("fd %s -> %s (mount %s, the sandbox's: %v)", fd, link, mnt, own[mnt])
		if host[mnt] {
			t.Errorf("the init's fd %s -> %s is on a mount of the host's mount namespace (%s)", fd, link, mnt)
		}
		kind := st.Mode & unix.S_IFMT
		if kind == unix.S_IFDIR || kind == unix.S_IFREG {
			checked++
		}
		if kind != unix.S_IFDIR {
			continue
		}
		dfd, err := unix.Open(filepath.Join("/proc", pid, "fd", fd), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("fd %s -> %s: open: %v", fd, link, err)
			continue
		}
		top, err := topOf(dfd)
		unix.Close(dfd)
		if err != nil {
			t.Errorf("fd %s -> %s: walk \"..\": %v", fd, link, err)
		} else if top.Dev == root.Dev && top.Ino == root.Ino {
			t.Errorf("the init's fd %s -> %s leads, through \"..\", to the host's root", fd, link)
		}
	}
	if checked == 0 {
		t.Fatal("the init holds no folder or file: the test checked nothing")
	}
	// The init's stamps still reach the host: the activity stamp while it
	// runs, the exit record once it stopped.
	info, err := sb.Info(t.Context())
	if err != nil || info.LastUsedAt.IsZero() {
		t.Errorf("no last use recorded: %v %+v", err, info)
	}
	if err := sb.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(local.Dir(sb), "toolbox", "exit.json"))
	var rec struct{ Reason string }
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Reason == "" {
		t.Errorf("exit record after a stop: %q, %v", b, err)
	}
}
