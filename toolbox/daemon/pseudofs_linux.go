package daemon

import "golang.org/x/sys/unix"

// isPseudoFSType reports whether a statfs type is that of a kernel
// pseudo file system.
func isPseudoFSType(t uint32) bool {
	switch t {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC,
		unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.DEVPTS_SUPER_MAGIC,
		unix.BPF_FS_MAGIC, unix.PSTOREFS_MAGIC, unix.EFIVARFS_MAGIC, unix.BINFMTFS_MAGIC:
		return true
	}
	return false
}
