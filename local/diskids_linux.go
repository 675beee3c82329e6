package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local/internal/disk"
)

// The owners of a fork's disk image.
//
// A fork's disk image is a copy of its source's, block for block, so its
// files keep the owners they had there: the source's host ids (the ids
// the source's image stores them with: for a fork of a fork, the first
// sandbox's). The fork has host ids of its own, and rather than changing
// the owner of every file of the copy (one lchown per file: a fork of
// 10k files would cost twice a create), its metadata records the ids
// the image's files are stored with (meta.DiskIDs), and every mount of
// the image is ID-mapped (mount_setattr MOUNT_ATTR_IDMAP on the detached
// mount disk.Mount returns) with a user namespace mapping those ids to
// the fork's own, and host uid and gid 0 to themselves (what the host
// makes there as root: the overlays' work folders). Everything that
// reaches the image through the mount sees the files with the fork's
// host ids, and what it writes is stored with the image's: the overlays
// of the root (their upper and work folders), the clones the init binds
// (home, /tmp, the working directory, the toolbox's folder), the host's
// own work there at a start, and snapshots (a copy of the image, mounted
// the same way). Ids outside both ranges show as the overflow id, as in
// any user namespace; nothing in a sandbox's image has them.
//
// DiskIDs is nil for every sandbox whose image stores its own host ids:
// all but forks, whose mounts are plain.

// diskIDs returns the host ids the files of the sandbox's disk image are
// stored with: DiskIDs, or its own HostIDs when nil.
func (m *meta) diskIDs() *idRange {
	if m.DiskIDs != nil {
		return m.DiskIDs
	}
	return m.HostIDs
}

// forkDiskIDs returns the DiskIDs of the fork fm of the sandbox m, whose
// disk image it copied: the ids the source's image stores, or nil when
// they are the fork's own.
func forkDiskIDs(m, fm *meta) *idRange {
	d := m.diskIDs()
	if d == nil || fm.HostIDs == nil || *d == *fm.HostIDs {
		return nil
	}
	r := *d
	return &r
}

// mountSandboxDisk mounts the disk image img of the sandbox m (its own,
// or a copy of it), detached, ID-mapped from the ids its files are stored
// with to the sandbox's host ids when they differ (a fork's): it returns
// the mount's root, which only its descriptors keep alive.
func mountSandboxDisk(img string, m *meta) (*os.File, error) {
	from, to := m.diskIDs(), m.HostIDs
	f, err := disk.Mount(img)
	if err != nil || from == nil || to == nil || *from == *to {
		return f, err
	}
	if err := idmapMount(int(f.Fd()), from, to); err != nil {
		f.Close()
		_ = disk.WaitReleased(context.Background(), img) // the next mount must not find it attached
		return nil, fmt.Errorf("disk image %s: %w", img, err)
	}
	return f, nil
}

// mountDiskOf mounts the disk image of the sandbox folder dir (metadata
// m) as mountSandboxDisk does.
func mountDiskOf(dir string, m *meta) (*os.File, error) {
	return mountSandboxDisk(filepath.Join(dir, diskImage), m)
}

// idmapMount makes the detached mount fd ID-mapped: files stored with
// the ids of the range from show (and are made) with those of to, the
// same place in it.
func idmapMount(fd int, from, to *idRange) error {
	userns, err := mappingUserns(from, to)
	if err != nil {
		return err
	}
	defer userns.Close()
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("ID-mapped mount from host ids %d to %d: %w", from.First, to.First, err)
	}
	return nil
}

// mappingUserns returns a new user namespace whose ids of the range from
// are the host's of the range to, and whose 0 is the host's 0: the ID
// mapping of a mount that shows files stored with from's ids as to's.
// It is made by a child that is stopped before it runs anything (it is
// traced, and stops at its exec) and killed once its namespace is open.
func mappingUserns(from, to *idRange) (*os.File, error) {
	n := min(from.Count, to.Count)
	if from.First < 1 || to.First < 1 || n < 1 {
		return nil, errors.New("ID-mapped mount: the ranges must not hold id 0")
	}
	maps := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: from.First, HostID: to.First, Size: n}}
	// The tracer is the thread that starts the child: it must stay.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := os.StartProcess("/proc/self/exe", []string{"agentbox-userns"}, &os.ProcAttr{Sys: &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: maps,
		GidMappings: maps,
		Ptrace:      true,
		Pdeathsig:   unix.SIGKILL,
	}})
	if err != nil {
		return nil, fmt.Errorf("make the user namespace of an ID-mapped mount: %w", err)
	}
	defer func() {
		_ = p.Kill()
		_, _ = p.Wait()
	}()
	f, err := os.Open("/proc/" + strconv.Itoa(p.Pid) + "/ns/user")
	if err != nil {
		return nil, fmt.Errorf("open the user namespace of an ID-mapped mount: %w", err)
	}
	return f, nil
}
