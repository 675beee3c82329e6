package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// The host side of a sandbox's limits at each start (limit), and the
// init's side of them (joinCommandCgroups, exitPath, activityPath).

// limit plans the limits of the sandbox of the folder dir (m its
// metadata) on this host, creates its cgroups with them and, for a new
// sandbox, its disk image, and records them in m. A limit the sandbox's
// Config asks for explicitly that cannot be enforced is an error.
func (s *Sandbox) limit(dir string, m *meta) (*cgroupSet, error) {
	_, err := os.Stat(filepath.Join(dir, metaFile))
	newSandbox := os.IsNotExist(err)
	h := probeHost()
	r := m.Config.Resources
	left := int64(-1)
	if newSandbox {
		left = diskLeft(s.opts.StateDir, s.opts.DiskBudgetMB)
	}
	l := planLimits(h, r, s.opts.StateDir, imageMB(dir), newSandbox, left)
	if off := explicitLimits(r) & l.unenforced(); off != 0 {
		return nil, fmt.Errorf("%w: Resources asks for a %s limit, which this host cannot enforce: %s", ErrLimitUnavailable, orList(off.names()), l.Why)
	}
	if newSandbox && r.DiskMiB > 0 {
		// Checked in New too: sandboxes made meanwhile may have taken
		// the budget.
		if err := checkDiskBudget(h, r, s.opts.StateDir, s.opts.DiskBudgetMB); err != nil {
			return nil, err
		}
	}
	if newSandbox {
		sweepCgroups(h.cgroups, s.opts.StateDir)
	}
	cg, err := newCgroupSet(h.cgroups, s.opts.StateDir, m.ID, &l)
	if err != nil {
		if explicitLimits(r)&(limitCPU|limitMemory|limitPIDs) != 0 {
			return nil, err
		}
		// Defaults are best effort: say why they are off.
		cg, l.CPU, l.MemoryMB, l.PIDs, l.Cgroup = nil, 0, 0, 0, 0
		l.addWhy(err.Error())
	}
	if newSandbox && l.DiskMB > 0 {
		if err := createImage(dir, s.opts.StateDir, l.DiskMB); err != nil {
			if explicitLimits(r)&limitDisk != 0 {
				_ = cg.Destroy(context.Background())
				return nil, err
			}
			// The default is best effort: the folders stay in the state
			// folder, and Info says why.
			l.DiskMB = 0
			l.addWhy(err.Error())
		}
	}
	m.Limits = &l
	return cg, nil
}

// plannedLimits returns the limits the sandbox shaped by r of the folder
// dir would get if it started now.
func plannedLimits(r Resources, dir string) limits {
	_, err := os.Stat(filepath.Join(dir, metaFile))
	stateDir := filepath.Dir(filepath.Dir(dir))
	return planLimits(probeHost(), r, stateDir, imageMB(dir), os.IsNotExist(err), diskLeft(stateDir, 0))
}

// pendingDisk is the disk image of a starting sandbox being mounted in
// the background (mountDiskOf) while the host forks the init and makes its
// network namespace: attaching a loop device waits for an RCU grace
// period, and the ext4 mount reads the image.
type pendingDisk struct {
	done  chan struct{}
	f     *os.File
	err   error
	taken bool
}

// mountInBackground starts mounting the disk image of the sandbox of the
// folder dir (m its metadata), when it has one, and returns the pending
// outcome; the caller releases it once it no longer needs it.
func mountInBackground(dir string, m *meta) *pendingDisk {
	d := &pendingDisk{done: make(chan struct{})}
	if m.Limits == nil || m.Limits.DiskMB == 0 {
		close(d.done)
		return d
	}
	mm := *m // the boot goes on changing m meanwhile
	go func() {
		defer close(d.done)
		d.f, d.err = mountDiskOf(dir, &mm)
	}()
	return d
}

// take waits for the mount and hands it over: the caller closes it.
func (d *pendingDisk) take() (*os.File, error) {
	<-d.done
	d.taken = true
	return d.f, d.err
}

// release waits for the mount and closes it unless it was taken.
func (d *pendingDisk) release() {
	<-d.done
	if !d.taken && d.f != nil {
		d.f.Close()
	}
}

// limitFiles adds to files (sent to the init with cfg) the descriptors
// the init needs for the sandbox's limits, and names them in cfg: the
// host's files of the init's stamps with stamps (the toolbox's folder is
// on the disk image, or below them: toolboxSource; see stampFiles), the
// files through which the init's thread that starts commands joins their
// cgroups, and its metrics cgroups.
func limitFiles(cfg *initConfig, files []*os.File, dir string, stamps bool, owner int, cg *cgroupSet) ([]*os.File, error) {
	if stamps {
		stamps, err := stampFiles(filepath.Join(dir, toolboxDir), owner)
		if err != nil {
			return files, err
		}
		files = append(files, stamps...)
		cfg.ExitFD, cfg.ActivityFD = len(files)-2, len(files)-1
	}
	cgFiles, err := cg.OpenCommandCgroups()
	if err != nil {
		return files, err
	}
	for _, f := range cgFiles {
		files = append(files, f)
		cfg.CommandCgroupFDs = append(cfg.CommandCgroupFDs, len(files)-1)
	}
	metrics, err := cg.OpenMetricsCgroups()
	if err != nil {
		return files, err
	}
	for _, f := range metrics {
		files = append(files, f)
		cfg.MetricsCgroupFDs = append(cfg.MetricsCgroupFDs, len(files)-1)
	}
	return files, nil
}

// metricsCgroups returns the folders, as the init sees them through its
// descriptors, of the cgroups GET /system/metrics reports.
func (cfg *initConfig) metricsCgroups(fds []int) []string {
	var out []string
	for _, i := range cfg.MetricsCgroupFDs {
		out = append(out, "/proc/self/fd/"+strconv.Itoa(fds[i]))
	}
	return out
}

// joinCommandCgroups moves the calling thread, which starts every command,
// into the commands' cgroups through the files the host opened, and closes
// them.
func joinCommandCgroups(cfg *initConfig, fds []int) error {
	tid := []byte(strconv.Itoa(unix.Gettid()))
	var err error
	for _, i := range cfg.CommandCgroupFDs {
		// Each is closed, also after a failure: a descriptor of a host
		// cgroup file must not outlive the setup.
		if _, werr := unix.Write(fds[i], tid); werr != nil && err == nil {
			err = fmt.Errorf("join the commands' cgroup: %w", werr)
		}
		unix.Close(fds[i])
	}
	return err
}

// stampFiles makes, in the host's folder dir (owned by owner, see
// ensureOwned), the init's exit record (empty: no record yet) and its
// activity stamp, and returns a detached mount (open_tree) of each file.
// The init holds these, not the folder: nothing else of the host is
// reachable from a detached mount of one file, while ".." from a
// descriptor of the folder led to the host's root (issue 24).
func stampFiles(dir string, owner int) ([]*os.File, error) {
	if err := ensureOwned(dir, 0, owner, owner); err != nil {
		return nil, err
	}
	var out []*os.File
	for _, name := range []string{exitFile, activityFile} {
		p := filepath.Join(dir, name)
		// Whatever was there (the folder is the sandbox's uid's) goes.
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			closeFiles(out)
			return nil, err
		}
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			err = unix.Fchown(fd, owner, owner)
			unix.Close(fd)
		}
		if err != nil {
			closeFiles(out)
			return nil, fmt.Errorf("init stamp %s: %w", p, err)
		}
		mfd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			closeFiles(out)
			return nil, fmt.Errorf("detached mount of %s: %w", p, err)
		}
		out = append(out, os.NewFile(uintptr(mfd), p))
	}
	return out, nil
}

// exitPath returns the path, in the init, of its exit record: the host's
// file when it sent one, else in the toolbox's folder.
func (cfg *initConfig) exitPath(fds []int) string {
	if cfg.ExitFD >= 0 {
		return "/proc/self/fd/" + strconv.Itoa(fds[cfg.ExitFD])
	}
	return filepath.Join(initTmpDir, exitFile)
}

// activityPath returns the path, in the init, of its activity stamp, and
// whether it exists already (the host's file): else newActivity creates
// it in the toolbox's folder.
func (cfg *initConfig) activityPath(fds []int) (string, bool) {
	if cfg.ActivityFD >= 0 {
		return "/proc/self/fd/" + strconv.Itoa(fds[cfg.ActivityFD]), true
	}
	return filepath.Join(initTmpDir, activityFile), false
}

// diskUsage returns the size and use, in MiB, of the disk image of the
// running sandbox m, seen through its init's root; zeros without one.
func diskUsage(m *meta) (size, used int64) {
	if m.Limits == nil || m.Limits.DiskMB == 0 || m.Init == nil {
		return 0, 0
	}
	var st unix.Statfs_t
	if unix.Statfs(filepath.Join("/proc", strconv.Itoa(m.Init.PID), "root", m.Config.home()), &st) != nil {
		return 0, 0
	}
	return int64(st.Blocks) * st.Bsize >> 20, int64(st.Blocks-st.Bfree) * st.Bsize >> 20
}
