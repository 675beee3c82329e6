package local

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// prepare makes the folders of the sandbox in dir and the toolbox socket,
// and returns the init's configuration with the descriptors to send it:
// the listening socket first, then the writable root of a sandbox made of
// an image (whose USER it resolves, in m too), then one detached mount per bind when the
// sandbox has a host id range of its own (otherwise the init opens the
// bind sources by path), then those of its limits (limitFiles) and its
// cgroups cg. pid is the started init's; pending is its disk image being
// mounted (mountInBackground).
func prepare(dir string, m *meta, stateDir string, pid int, cg *cgroupSet, pending *pendingDisk) (*initConfig, []*os.File, error) {
	cfg := newInitConfig(m.ID, m.Config)
	own, err := newOwnership(m.HostIDs, pid, len(m.Config.Volumes) > 0 || m.Root != nil)
	if err != nil {
		return nil, nil, err
	}
	defer own.close()
	data, disk, err := prepareData(dir, stateDir, pending)
	if err != nil {
		return nil, nil, err
	}
	if disk != nil {
		defer disk.Close() // the binds' clones keep it mounted
	}
	files, err := rootFiles(cfg, m, dir, data, own)
	if err != nil {
		return nil, nil, err
	}
	if files, err = bindFiles(cfg, files, m, dir, data, stateDir, own); err != nil {
		closeFiles(files)
		return nil, nil, err
	}
	if files, err = limitFiles(cfg, files, dir, disk != nil || own.shifted(), own.owner(), cg); err != nil {
		closeFiles(files)
		return nil, nil, err
	}
	return cfg, files, nil
}

// prepareData returns the folder of the sandbox's data: its state folder
// dir, or the disk image's mount (disk, which the caller closes) when it
// has one; the toolbox server's own files (command logs) there are
// removed, being fresh each boot.
func prepareData(dir, stateDir string, pending *pendingDisk) (data string, disk *os.File, err error) {
	if err := removeAll(filepath.Join(dir, toolboxDir)); err != nil {
		return "", nil, stateDirError(stateDir, err)
	}
	if disk, err = pending.take(); err != nil || disk == nil {
		return dir, nil, err
	}
	data = "/proc/self/fd/" + strconv.Itoa(int(disk.Fd()))
	if err := removeAll(filepath.Join(data, toolboxDir)); err != nil {
		disk.Close()
		return "", nil, fmt.Errorf("disk image: %w", err)
	}
	return data, disk, nil
}

// rootFiles mounts the sandbox's root (an image's, or the host's with
// its system folders) and returns the files the init gets: the toolbox
// socket's listener first, then the root and the system folders, which
// cfg names.
func rootFiles(cfg *initConfig, m *meta, dir, data string, own *ownership) ([]*os.File, error) {
	var root *os.File
	var sys []*os.File
	var sysTargets []string
	var err error
	switch {
	case m.Root != nil && m.Root.Host:
		if root, sys, sysTargets, err = mountHostRoot(m.Root, data, m.Config.User, m.Config.home(), own); err != nil {
			return nil, err
		}
	case m.Root != nil:
		if root, err = mountRoot(m.Root, data, own); err != nil {
			return nil, err
		}
		if cfg.RunAs, err = imageUser(root, m.Root.Config.User, own.ids); err != nil {
			root.Close()
			return nil, err
		}
		m.RunAs = cfg.RunAs
	}
	ln, err := listenToolbox(dir)
	if err != nil {
		if root != nil {
			root.Close()
		}
		closeFiles(sys)
		return nil, err
	}
	files := []*os.File{ln}
	if root != nil {
		files = append(files, root)
		cfg.RootFD, cfg.Root = len(files)-1, m.Root
		cfg.WorkingDirectory = m.Root.workingDirectory(&m.Config)
	}
	for i, f := range sys {
		files = append(files, f)
		cfg.Binds = append(cfg.Binds, bindSpec{FD: len(files) - 1, Target: sysTargets[i]})
	}
	if _, err := os.Stat("/opt"); err == nil && m.Root != nil && m.Root.Host {
		// The host's /opt, read-only and not ID-mapped, as without a
		// writable root: what only the host's root may read stays so.
		cfg.Binds = append(cfg.Binds, bindSpec{FD: -1, Path: "/opt", Target: "/opt", ReadOnly: true})
	}
	return files, nil
}

// bindFiles adds to cfg the binds of the sandbox's state folders and
// volumes, and its /dev/fuse with Confinement.AllowFUSE, and to files
// the sources they open. On error the caller closes files.
func bindFiles(cfg *initConfig, files []*os.File, m *meta, dir, data, stateDir string, own *ownership) ([]*os.File, error) {
	add := func(spec bindSpec, f *os.File) bindSpec {
		if f != nil {
			files = append(files, f)
			spec.FD = len(files) - 1
		}
		return spec
	}
	for _, b := range stateBinds(data, toolboxSource(dir, data, own), stateDir, &m.Config, cfg.RunAs) {
		spec, f, err := bindSource(b, stateDir, own)
		if err != nil {
			return files, err
		}
		cfg.Binds = append(cfg.Binds, add(spec, f))
	}
	if m.Config.Confinement.AllowFUSE {
		spec, f, err := fuseDevice(dir, own)
		if err != nil {
			return files, err
		}
		spec = add(spec, f)
		cfg.FUSEDev = &spec
	}
	return files, nil
}

// toolboxSource returns the folder bound at /run/agentbox, the toolbox
// server's files, for the sandbox folder dir whose data folder is data:
// toolbox/ of data, or, for a sandbox of a host id range of its own
// without a disk image (data is dir), toolbox/run/ of dir. The host's
// files of the init's exit record and activity stamp are in dir's
// toolbox/ (stampFiles), which the sandbox must not reach: it could date
// its last use in the future (never idle for serve's timers, nor for the
// auto-stop of a paused sandbox) or write its own exit record.
func toolboxSource(dir, data string, own *ownership) string {
	if data == dir && own.shifted() {
		return filepath.Join(dir, toolboxDir, toolboxRunDir)
	}
	return filepath.Join(data, toolboxDir)
}

// hostBind is a folder of the host to bind into the sandbox.
type hostBind struct {
	host string
	// perm is the folder's mode, set back at every start when not 0 (then
	// 0755): 0700 for the home, which no other user of the host, or of the
	// sandbox, may read; 01777 for /tmp.
	perm uint32
	// owner, when set, owns the folder inside (the home and working
	// directory of an image's USER); otherwise the sandbox's root does.
	owner *runAs
	// volume folders are shared between sandboxes: their files keep
	// canonical owners (volume_linux.go).
	volume bool
	bindSpec
}

// stateBinds lists the folders a sandbox writes, each bound in from the
// folder data (its state folder, or the root of its disk image): home,
// /tmp, the toolbox server's files (from the folder toolbox), the working
// directory unless one of those holds it; and the volumes, from the state
// dir. The home and working directory are user's, when set (an image's
// USER).
func stateBinds(data, toolbox, stateDir string, c *Config, user *runAs) []hostBind {
	home, wd := c.home(), c.WorkingDirectory
	binds := []hostBind{
		{host: filepath.Join(data, homeDir), perm: 0o700, owner: user, bindSpec: bindSpec{Target: home}},
		{host: filepath.Join(data, tmpDir), perm: 0o1777, bindSpec: bindSpec{Target: sandboxTmp}},
		{host: toolbox, bindSpec: bindSpec{Target: initTmpDir}},
	}
	covered := within(wd, home) || within(wd, sandboxTmp)
	for _, v := range c.Volumes {
		binds = append(binds, hostBind{host: filepath.Join(stateDir, volumesDir, v.Name), volume: true, bindSpec: bindSpec{Target: v.MountPath, ReadOnly: v.ReadOnly}})
		covered = covered || within(wd, v.MountPath)
	}
	if !covered {
		binds = append(binds, hostBind{host: filepath.Join(data, workDir), owner: user, bindSpec: bindSpec{Target: wd}})
	}
	return binds
}

// bindSource makes the host folder of b, owned as own says, and returns
// how the init finds it. With a range of its own, the sandbox's host uid
// may not traverse the state dir (it often lives under /root), so the
// init gets a detached clone of the folder, returned as f (ID-mapped for
// a volume); otherwise it opens the folder by path itself, in its own
// mount namespace.
func bindSource(b hostBind, stateDir string, own *ownership) (spec bindSpec, f *os.File, err error) {
	spec = b.bindSpec
	if err := own.prepareFolder(b); err != nil {
		return spec, nil, stateDirError(stateDir, err)
	}
	if !own.shifted() {
		spec.FD, spec.Path = -1, b.host
		return spec, nil, nil
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, b.host, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return spec, nil, fmt.Errorf("clone mount of %s: %w", b.host, err)
	}
	f = os.NewFile(uintptr(fd), b.host)
	if err := own.setMountAttr(fd, b); err != nil {
		f.Close()
		return spec, nil, err
	}
	return spec, f, nil
}

// listenToolbox listens on the toolbox socket of the sandbox folder dir and
// returns the listening socket, for the init to serve.
func listenToolbox(dir string) (*os.File, error) {
	sock := filepath.Join(dir, socketFile)
	_ = os.Remove(sock)
	sockPath, release, err := shortPath(dir, socketFile)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", sockPath)
	release()
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	f, err := ul.File()
	ul.Close()
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(sock, 0o600)
	return f, nil
}
