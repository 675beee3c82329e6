package local

import "github.com/agentbox-dev/agentbox/sandbox"

// networkNeedsRootError is the error of a network mode of c that only
// root can make (checkNetworkAvailable): it names the options that work
// without root as [sandbox.Option]s, which the CLI names by its flags.
func networkNeedsRootError(c *Config) error {
	what := []any{"The default network (the public internet only)"}
	if len(c.Network.Allow) > 0 {
		what = []any{"An allow list of address ranges (", sandbox.OptionNetworkAllow, ")"}
	}
	parts := append(what, " needs root: the sandbox's link and firewall are made by root; without root use the blocked mode (",
		sandbox.OptionNetworkBlocked, "), an allow list of domains alone (", sandbox.OptionNetworkDomains,
		"; an egress proxy, no root needed) or, for trusted commands only, the host mode (", sandbox.OptionNetworkHost, ")")
	return sandbox.NewOptionError(sandbox.ErrIsolationUnavailable, parts...)
}
