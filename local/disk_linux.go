package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox's disk limit: everything it writes but its volumes (home,
// /tmp, the working directory, the toolbox's logs) lives on an ext4 file
// system of its own, a sparse image file in its state folder (diskImage)
// of the sandbox's DiskMB. At each start the host attaches the image to a
// loop device (LO_FLAGS_AUTOCLEAR) and mounts it detached (fsmount),
// never in any mount namespace of the host; the init gets clones of its
// folders (open_tree) and binds them in place. So the mount lives in the
// sandbox's mount namespace only: when the init ends, however it ends, the
// kernel unmounts the file system and frees the loop device, and a host
// process that dies while it starts a sandbox leaves none behind either
// (its descriptors were the only references). Stop and Remove wait until
// the loop device is gone, so that the next start never mounts the image
// twice.
//
// Formatting costs tens of milliseconds, so each size is formatted once,
// into a template in the state dir (templatesDir), and a new sandbox's
// image is a sparse copy of it (a few MiB of metadata).

// probeDisk returns nil when this host can give sandboxes disk images,
// else why not.
func probeDisk() error {
	if os.Geteuid() != 0 || !shiftedMode() {
		return errors.New("disk limits need root (loop devices)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("disk limits need loop devices: %w", err)
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\text4\n") {
		return errors.New("disk limits need ext4, which this kernel does not offer")
	}
	if _, err := mkfsPath(); err != nil {
		return err
	}
	return nil
}

// mkfsPath finds mkfs.ext4 (Debian package e2fsprogs).
func mkfsPath() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("disk limits need mkfs.ext4: install e2fsprogs")
}

// imageMB returns the size of the disk image of the sandbox folder dir, in
// MiB, or 0 when it has none.
func imageMB(dir string) int64 {
	fi, err := os.Stat(filepath.Join(dir, diskImage))
	if err != nil {
		return 0
	}
	return fi.Size() >> 20
}

// createImage makes the disk image of sizeMB MiB of the sandbox folder
// dir, a sparse copy of the template of that size in stateDir.
func createImage(dir, stateDir string, sizeMB int64) error {
	tpl, err := diskTemplate(stateDir, sizeMB)
	if err != nil {
		return err
	}
	img := filepath.Join(dir, diskImage)
	tmp := img + ".tmp"
	_ = os.Remove(tmp) // left by a process that died creating it
	if err := copySparse(tmp, tpl); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create disk image: %w", err)
	}
	return os.Rename(tmp, img)
}

// diskTemplate returns the template image of sizeMB MiB in stateDir,
// formatting it first when there is none.
func diskTemplate(stateDir string, sizeMB int64) (string, error) {
	dir := filepath.Join(stateDir, templatesDir)
	tpl := filepath.Join(dir, fmt.Sprintf("ext4-%dM.img", sizeMB))
	if _, err := os.Stat(tpl); err == nil {
		return tpl, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", stateDirError(stateDir, err)
	}
	f, err := os.CreateTemp(dir, ".format-*")
	if err != nil {
		return "", stateDirError(stateDir, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Truncate(sizeMB << 20)
	f.Close()
	if err != nil {
		return "", fmt.Errorf("create disk template: %w", err)
	}
	mkfs, err := mkfsPath()
	if err != nil {
		return "", err
	}
	// One inode per 16 KiB whatever the size; no reserved blocks; no
	// zeroing: the file is sparse, its holes read as zeros.
	out, err := exec.Command(mkfs, "-q", "-F", "-b", "4096", "-i", "16384", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("format disk template: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// Concurrent makers each rename a complete template: any one wins.
	if err := os.Rename(tmp, tpl); err != nil {
		return "", fmt.Errorf("create disk template: %w", err)
	}
	return tpl, nil
}

// copySparse copies the file src to the new file dst (mode 0600), only
// its data: its holes stay holes.
func copySparse(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := copyData(out, in, fi.Size()); err != nil {
		return err
	}
	return out.Close()
}

// copyData copies the size bytes of the regular file in to the empty
// file out, only its data (SEEK_DATA, SEEK_HOLE): its holes stay holes,
// so a sparse file of 64 GB apparent size costs what it holds. The data
// goes by copy_file_range (a reflink or an in-kernel copy), or read and
// write across file systems that do not support it.
func copyData(out, in *os.File, size int64) error {
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if err := copyRange(out, in, data, hole); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}

// copyRange copies the bytes [from, to) of in to the same place in out.
func copyRange(out, in *os.File, from, to int64) error {
	for from < to {
		o := from
		n, err := unix.CopyFileRange(int(in.Fd()), &o, int(out.Fd()), &o, int(min(to-from, 1<<30)), 0)
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			_, err := io.Copy(io.NewOffsetWriter(out, from), io.NewSectionReader(in, from, to-from))
			return err
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		from += int64(n)
	}
	return nil
}

// mountDisk attaches the disk image of the sandbox folder dir to a loop
// device and mounts it, detached: it returns the mount's root, which only
// its descriptors keep alive.
func mountDisk(dir string) (*os.File, error) {
	img := filepath.Join(dir, diskImage)
	dev, err := attachLoop(img)
	if err != nil {
		return nil, fmt.Errorf("disk image %s: %w", img, err)
	}
	defer dev.Close() // the mount holds the device; then it clears itself
	fsfd, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("mount disk image: %w", err)
	}
	defer unix.Close(fsfd)
	for _, o := range [][2]string{{"source", dev.Name()}, {"errors", "remount-ro"}, {"noinit_itable", ""}} {
		if o[1] == "" {
			err = unix.FsconfigSetFlag(fsfd, o[0])
		} else {
			err = unix.FsconfigSetString(fsfd, o[0], o[1])
		}
		if err != nil {
			return nil, fmt.Errorf("mount disk image: option %s: %w", o[0], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("mount disk image %s: %w", img, err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("mount disk image %s: %w", img, err)
	}
	return os.NewFile(uintptr(mfd), img), nil
}

// attachLoop attaches the file img to a free loop device, which clears
// itself once its last user (the mount) is gone, and returns the device.
func attachLoop(img string) (*os.File, error) {
	f, err := os.OpenFile(img, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], img)
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		// Another process took the device meanwhile: find another.
		if !errors.Is(err, unix.EBUSY) || try == 100 {
			return nil, fmt.Errorf("attach loop device: %w", err)
		}
	}
}

// waitDiskReleased waits until no loop device holds the disk image of the
// sandbox folder dir: its init has ended, and the kernel unmounts the
// file system and clears the device right after.
func waitDiskReleased(ctx context.Context, dir string) error {
	img := filepath.Join(dir, diskImage)
	deadline := time.Now().Add(10 * time.Second)
	for {
		dev := loopOf(img)
		if dev == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("disk image %s: still attached to %s", img, dev)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// loopOf returns the loop device backed by the file img, or "".
func loopOf(img string) string {
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, d := range devs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		f := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if f == img {
			return filepath.Base(filepath.Dir(filepath.Dir(d)))
		}
	}
	return ""
}
