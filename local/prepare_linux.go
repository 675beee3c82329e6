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
// the listening socket first, then one detached mount per bind when
// shifted (otherwise the init opens the bind sources by path), then those
// of its limits (limitFiles) and its cgroups cg.
func prepare(dir string, m *meta, stateDir string, shifted bool, cg *cgroupSet) (*initConfig, []*os.File, error) {
	cfg := newInitConfig(m.ID, m.Config)
	// The toolbox server's own files (command logs) are fresh each boot.
	if err := removeAll(filepath.Join(dir, toolboxDir)); err != nil {
		return nil, nil, stateDirError(stateDir, err)
	}
	disk, err := openDisk(dir, m)
	if err != nil {
		return nil, nil, err
	}
	defer disk.Close() // the binds' clones keep it mounted
	data := dir
	if disk != nil {
		data = "/proc/self/fd/" + strconv.Itoa(int(disk.Fd()))
		if err := removeAll(filepath.Join(data, toolboxDir)); err != nil {
			return nil, nil, fmt.Errorf("disk image: %w", err)
		}
	}
	binds := stateBinds(data, stateDir, &m.Config)
	ln, err := listenToolbox(dir)
	if err != nil {
		return nil, nil, err
	}
	files := []*os.File{ln}
	for _, b := range binds {
		spec, f, err := bindSource(b, stateDir, shifted)
		if err != nil {
			closeFiles(files)
			return nil, nil, err
		}
		if f != nil {
			files = append(files, f)
			spec.FD = len(files) - 1
		}
		cfg.Binds = append(cfg.Binds, spec)
	}
	if files, err = limitFiles(cfg, files, dir, disk != nil, shifted, cg); err != nil {
		closeFiles(files)
		return nil, nil, err
	}
	return cfg, files, nil
}

// hostBind is a folder of the host to bind into the sandbox.
type hostBind struct {
	host string
	// private folders (the home) are kept at mode 0700: no other user of
	// the host, or of the sandbox, may read them.
	private bool
	bindSpec
}

// stateBinds lists the folders a sandbox writes, each bound in from the
// folder data (its state folder, or the root of its disk image): home,
// /tmp, the toolbox server's files, the working directory unless one of
// those holds it; and the volumes, from the state dir.
func stateBinds(data, stateDir string, c *Config) []hostBind {
	home, wd := c.home(), c.WorkingDirectory
	binds := []hostBind{
		{filepath.Join(data, homeDir), true, bindSpec{Target: home}},
		{filepath.Join(data, tmpDir), false, bindSpec{Target: sandboxTmp}},
		{filepath.Join(data, toolboxDir), false, bindSpec{Target: initTmpDir}},
	}
	covered := within(wd, home) || within(wd, sandboxTmp)
	for _, v := range c.Volumes {
		binds = append(binds, hostBind{filepath.Join(stateDir, volumesDir, v.Name), false, bindSpec{Target: v.MountPath, ReadOnly: v.ReadOnly}})
		covered = covered || within(wd, v.MountPath)
	}
	if !covered {
		binds = append(binds, hostBind{filepath.Join(data, workDir), false, bindSpec{Target: wd}})
	}
	return binds
}

// bindSource makes the host folder of b (given to the sandbox root when
// shifted) and returns how the init finds it. Shifted, the sandbox's host
// uid may not traverse the state dir (it often lives under /root), so the
// init gets a detached clone of the folder, returned as f; otherwise it
// opens the folder by path itself, in its own mount namespace.
func bindSource(b hostBind, stateDir string, shifted bool) (spec bindSpec, f *os.File, err error) {
	spec = b.bindSpec
	if err := ensureOwned(b.host, b.private, shifted); err != nil {
		return spec, nil, stateDirError(stateDir, err)
	}
	if !shifted {
		spec.FD, spec.Path = -1, b.host
		return spec, nil, nil
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, b.host, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return spec, nil, fmt.Errorf("clone mount of %s: %w", b.host, err)
	}
	f = os.NewFile(uintptr(fd), b.host)
	if b.ReadOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			f.Close()
			return spec, nil, fmt.Errorf("make %s read-only: %w", b.host, err)
		}
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
