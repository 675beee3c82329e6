// Package disk makes, mounts and releases the ext4 disk images that hold
// a sandbox's disk limit.
//
// An image is a sparse file. Formatting costs tens of milliseconds, so
// each size is formatted once, into a template (Template), and an image
// is a sparse copy of it (Create: a few MiB of metadata). Mount attaches
// an image to a loop device that clears itself (LO_FLAGS_AUTOCLEAR) and
// mounts it detached (fsmount), in no mount namespace: its descriptors
// are its only references, so when the last one is closed, however the
// process holding it ends, the kernel unmounts the file system and frees
// the loop device. WaitReleased waits for that, so that an image is never
// mounted twice.
//
// It is Linux's: on other systems the package is empty.
package disk
