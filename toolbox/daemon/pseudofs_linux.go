package daemon

import "golang.org/x/sys/unix"

// isPseudoFS reports whether dir is the root of a kernel pseudo file
// system (proc, sysfs, cgroups, debugfs …), whose files are not content
// to search and may block or be endless when read.
func isPseudoFS(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC,
		unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.DEVPTS_SUPER_MAGIC,
		unix.BPF_FS_MAGIC, unix.PSTOREFS_MAGIC, unix.EFIVARFS_MAGIC, unix.BINFMTFS_MAGIC:
		return true
	}
	return false
}
