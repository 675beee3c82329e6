package local

import "path/filepath"

// Layout of a state dir:
//
//	<StateDir>/sandboxes/<id>/meta.json     metadata, pid and cgroups of the running init
//	<StateDir>/sandboxes/<id>/toolbox.sock  the init's toolbox API
//	<StateDir>/sandboxes/<id>/home/         /home/<user>
//	<StateDir>/sandboxes/<id>/tmp/          /tmp
//	<StateDir>/sandboxes/<id>/workdir/      the working directory, when outside home and /tmp
//	<StateDir>/sandboxes/<id>/toolbox/      the init's exit record and its activity stamp
//	                                        (the host's, out of the sandbox's reach) and,
//	                                        without a disk image, the toolbox server's files
//	                                        in run/ (/run/agentbox inside; toolbox/ itself
//	                                        for sandboxes without a host id range, not
//	                                        root's), emptied each boot
//	<StateDir>/sandboxes/<id>/egress-log.json  with DomainAllowList: the policy log of its
//	                                        egress proxy (domainproxy.go; host side only)
//	<StateDir>/sandboxes/<id>/disk.img      with a disk limit: the sparse ext4 image that
//	                                        holds home/, tmp/, workdir/ and toolbox/ (the
//	                                        latter's on the host keeps only the exit record
//	                                        and the activity stamp); a fork's is a copy of
//	                                        its source's, files owned by the source's host ids
//	                                        (meta.json's diskIds), mounted ID-mapped to the
//	                                        fork's own (diskids_linux.go)
//	<StateDir>/sandboxes/<id>/rootfs/       with an Image or Snapshot: upper/ and work/ of its
//	                                        writable root (root.go), on disk.img when it has one
//	<StateDir>/templates/ext4-<N>M.img      formatted images that new disk images copy
//	<StateDir>/images/                      the image store: layers, images, snapshots and the
//	                                        sandboxes holding them (imagestore.go)
//
// One file holds everything a host process needs: creating files is the
// slowest step of a start on some disks.
//
//	<StateDir>/volumes/<name>/              named volumes (mode 0700 folder: see volume_linux.go)
//	<StateDir>/hostids.json                 the host uid ranges of the sandboxes (hostids.go)
//	<StateDir>/hostids.lock                 flocked while a process reads or changes hostids.json
//	<StateDir>/egress-proxy.sock            the control socket of the state dir's shared egress
//	                                        proxy (egressd_linux.go), when it runs
//	<StateDir>/egress-proxy.lock            flocked while a process talks to it, and by the
//	                                        proxy as it exits
const (
	sandboxesDir  = "sandboxes"
	volumesDir    = "volumes"
	metaFile      = "meta.json"
	socketFile    = "toolbox.sock"
	homeDir       = "home"
	tmpDir        = "tmp"
	workDir       = "workdir"
	toolboxDir    = "toolbox"
	toolboxRunDir = "run"       // in toolboxDir, without a disk image: /run/agentbox inside
	exitFile      = "exit.json" // in toolboxDir
	activityFile  = "last-used" // in toolboxDir; its mtime is when the toolbox API was last used
	trashPrefix   = ".trash-"   // a sandbox folder being removed
	diskImage     = "disk.img"
	templatesDir  = "templates"
	hostIDsFile   = "hostids.json"
	hostIDsLock   = "hostids.lock"
)

// sandboxDir returns the folder of the sandbox id.
func sandboxDir(stateDir, id string) string {
	return filepath.Join(stateDir, sandboxesDir, id)
}
