// Package fuse lets commands of a sandbox mount FUSE file systems though
// they hold no CAP_SYS_ADMIN. The kernel would refuse their mount(2)
// whatever the type; the sandbox's system call filter hands mount and
// umount2 to the init instead (SECCOMP_RET_USER_NOTIF), and the init's
// Supervisor, which holds the capabilities of the sandbox's user
// namespace, does on the caller's behalf what it allows: FUSE mounts and
// unmounts, nothing else.
//
// It is Linux's: on other systems the package is empty.
package fuse
