package local

import "github.com/agentbox-dev/agentbox/sandbox"

// networkNeedsRootError is the error of a network mode of c that needs
// root or, without root, a usable /dev/net/tun, which tunErr says is not
// (checkNetworkAvailable): it names the options that work without either
// as [sandbox.Option]s, which the CLI names by its flags.
func networkNeedsRootError(c *Config, tunErr error) error {
	what := []any{"The default network (the public internet only)"}
	if len(c.Network.Allow) > 0 {
		what = []any{"An allow list of address ranges (", sandbox.OptionNetworkAllow, ")"}
	}
	parts := append(what, " needs root or, without root, a /dev/net/tun this user may open for reading and writing (",
		tunErr.Error(), "; most systems make it mode 0666): as root the sandbox's link and firewall are made by root, "+
			"without root its user-mode network needs a TUN device; else use the blocked mode (",
		sandbox.OptionNetworkBlocked, "), an allow list of domains alone (", sandbox.OptionNetworkDomains,
		"; an egress proxy, no root needed) or, for trusted commands only, the host mode (", sandbox.OptionNetworkHost, ")")
	return sandbox.NewOptionError(sandbox.ErrIsolationUnavailable, parts...)
}
