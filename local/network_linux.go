package local

import "golang.org/x/sys/unix"

// The sandbox's network. By default a sandbox shares the host's network
// namespace; with NetworkBlockAll or DomainAllowList it gets its own, with
// only loopback (and, with DomainAllowList, the bridge to its egress
// proxy: domainproxy_linux.go). The host side chooses the namespace
// (networkCloneFlags); the init side sets up the interfaces inside it
// (setupNetwork).

// networkCloneFlags returns the clone flags of the sandbox's network
// namespace: CLONE_NEWNET for a sandbox of its own network.
func networkCloneFlags(c *Config) uintptr {
	if c.ownNetwork() {
		return unix.CLONE_NEWNET
	}
	return 0
}

// setupNetwork runs in the init: it brings up loopback in a network
// namespace of the sandbox's own.
func setupNetwork(c *Config) error {
	if !c.ownNetwork() {
		return nil
	}
	return loopbackUp()
}

// loopbackUp sets the IFF_UP flag of lo.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
