package disk

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

// Available returns nil when this host can make and mount disk images
// (loop devices, ext4, mkfs.ext4), else why not. Attaching loop devices
// needs root besides, which it does not check.
func Available() error {
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

// SizeMB returns the size of the disk image img, in MiB, or 0 when there
// is none.
func SizeMB(img string) int64 {
	fi, err := os.Stat(img)
	if err != nil {
		return 0
	}
	return fi.Size() >> 20
}

// Create makes the disk image img, a sparse copy of the template tpl
// (Template), through img+".tmp", which it replaces if a process that
// died creating it left one.
func Create(img, tpl string) error {
	tmp := img + ".tmp"
	_ = os.Remove(tmp) // left by a process that died creating it
	if err := copySparse(tmp, tpl); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create disk image: %w", err)
	}
	return os.Rename(tmp, img)
}

// Template returns the template image of sizeMB MiB in the folder dir
// (ext4-<size>M.img), formatting it first when there is none. Concurrent
// callers, in any process, each format one and one wins.
func Template(dir string, sizeMB int64) (string, error) {
	tpl := filepath.Join(dir, fmt.Sprintf("ext4-%dM.img", sizeMB))
	if _, err := os.Stat(tpl); err == nil {
		return tpl, nil
	}
	f, err := os.CreateTemp(dir, ".format-*")
	if err != nil {
		return "", fmt.Errorf("create disk template: %w", err)
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
	return CopyFile(dst, in)
}

// CopyFile copies the regular file in, open at its start, to the new file
// dst (mode 0600; a link there is not followed), only its data
// (CopyData): its holes stay holes.
func CopyFile(dst string, in *os.File) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("copy %s: not a regular file any more", in.Name())
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if err := CopyData(out, in, fi.Size()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// CopyData copies the size bytes of the regular file in to the empty
// file out, only its data (SEEK_DATA, SEEK_HOLE): its holes stay holes,
// so a sparse file of 64 GB apparent size costs what it holds. The data
// goes by copy_file_range (a reflink or an in-kernel copy), or read and
// write across file systems that do not support it.
func CopyData(out, in *os.File, size int64) error {
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

// Mount attaches the disk image img to a loop device and mounts it,
// detached (in no mount namespace): it returns the mount's root, which
// only its descriptors keep alive; once they are closed the kernel
// unmounts it and clears the device.
func Mount(img string) (*os.File, error) {
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

// WaitReleased waits, up to 10 seconds, until no loop device holds the
// disk image img: its last mount's descriptors are closed (the sandbox's
// init has ended), and the kernel unmounts the file system and clears the
// device right after.
func WaitReleased(ctx context.Context, img string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		dev := LoopOf(img)
		if dev == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("disk image %s: still attached to %s", img, dev)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// LoopOf returns the loop device (loopN) backed by the file img, or "".
func LoopOf(img string) string {
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
