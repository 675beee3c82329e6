package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

func (a *app) networkCommand() *cobra.Command {
	var (
		blockAll, def bool
		cidrs, names  string
	)
	c := &cobra.Command{
		Use:   "network ID (--default | --block-all | [--allow-cidr LIST] [--allow-domain LIST])",
		Short: "Change the network policy of a sandbox, live",
		Long: `Change the network policy of a sandbox. A running sandbox changes at once, for
new connections and existing ones (a connection the new policy refuses is cut);
a stopped one gets the policy when it starts. The policy is kept with the
sandbox.

  --default              the public internet only (not the host, its networks,
                         private or link-local addresses, other sandboxes)
  --block-all            loopback only
  --allow-cidr LIST      only these address ranges (comma-separated CIDRs, at
                         most 10); no DNS
  --allow-domain LIST    only these names (comma-separated, *.example.com
                         wildcards), through an egress proxy

--allow-cidr and --allow-domain may be combined. Without a flag, the command
prints the sandbox's network.`,
		Example: `  agentbox sandbox network default --block-all
  agentbox sandbox network default --allow-cidr 203.0.113.0/24,2001:db8::/32
  agentbox sandbox network default --allow-domain pypi.org,*.pythonhosted.org
  agentbox sandbox network default --default`,
		Args: exactArgs(1, "a sandbox id (see 'agentbox sandbox ls')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, w, id := cmd.Context(), cmd.OutOrStdout(), args[0]
			n := 0
			for _, set := range []bool{def, blockAll, cidrs != "" || names != ""} {
				if set {
					n++
				}
			}
			if n > 1 {
				return usagef("--default, --block-all and --allow-cidr/--allow-domain are different policies: give one of them")
			}
			if n == 1 {
				p, err := networkFlags(blockAll, cidrs, names)
				if err != nil {
					return err
				}
				if err := a.withHandle(ctx, id, func(h Handle) error { return h.UpdateNetworkSettings(ctx, p) }); err != nil {
					return notFound(err, id)
				}
			}
			return a.printNetwork(ctx, w, id)
		},
	}
	fs := c.Flags()
	fs.BoolVar(&def, "default", false, "the public internet only")
	fs.BoolVar(&blockAll, "block-all", false, "loopback only")
	fs.StringVar(&cidrs, "allow-cidr", "", "only these comma-separated CIDRs")
	fs.StringVar(&names, "allow-domain", "", "only these comma-separated names, through an egress proxy")
	return c
}

// networkFlags returns the policy of the network flags, read by the
// parsers every engine uses; errors name the flag.
func networkFlags(blockAll bool, cidrs, names string) (sandbox.NetworkPolicy, error) {
	if blockAll {
		return sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}, nil
	}
	if cidrs == "" && names == "" {
		return sandbox.NetworkPolicy{Mode: sandbox.NetworkPublic}, nil
	}
	p := sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList}
	var err error
	if p.Allow, err = sandbox.ParseAllowList(cidrs); err != nil {
		return p, usagef("--allow-cidr: %v", err)
	}
	if p.Domains, err = sandbox.ParseDomainAllowList(names); err != nil {
		return p, usagef("--allow-domain: %v", err)
	}
	if err := p.Validate(); err != nil {
		return p, usagef("--allow-cidr %q and --allow-domain %q list nothing: give CIDRs or names, or --block-all", cidrs, names)
	}
	return p, nil
}

// printNetwork prints the network of the sandbox id.
func (a *app) printNetwork(ctx context.Context, w io.Writer, id string) error {
	in, err := a.lookup(ctx, id)
	if err != nil {
		return notFound(err, id)
	}
	if in.Network == nil {
		return fmt.Errorf("sandbox %q: the engine does not describe its network", id)
	}
	if a.json {
		return writeJSON(w, in.Network)
	}
	t := newTable(w)
	networkRows(t, in.Network)
	return t.flush()
}

// networkRows adds the rows describing n to t.
func networkRows(t *table, n *sandbox.NetworkInfo) {
	t.row("Network:", networkText(n.Mode))
	if len(n.AllowList) > 0 {
		t.row("Ranges:", strings.Join(n.AllowList, ", "))
	}
	if len(n.DomainAllowList) > 0 {
		t.row("Domains:", strings.Join(n.DomainAllowList, ", "))
	}
	for i, p := range n.Ports {
		label := ""
		if i == 0 {
			label = "Ports:"
		}
		t.row(label, portText(p))
	}
	if n.RefusedPackets > 0 || n.RefusedConnections > 0 {
		t.row("Refused:", fmt.Sprintf("%d packets by the firewall, %d connections by the egress proxy", n.RefusedPackets, n.RefusedConnections))
	}
	for i, r := range n.PolicyLog {
		label := ""
		if i == 0 {
			label = "Policy log:"
		}
		target := r.Host
		if r.Port != 0 {
			target += ":" + strconv.Itoa(r.Port)
		}
		t.row(label, r.Time.UTC().Format("15:04:05")+" "+r.Protocol+" "+target+": "+r.Reason)
	}
	if n.Note != "" {
		t.row("Note:", n.Note)
	}
}

// portText formats a published port.
func portText(p sandbox.PublishedPort) string {
	return fmt.Sprintf("%s:%d -> %d", p.HostAddress, p.HostPort, p.SandboxPort)
}

func (a *app) portsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "ports",
		Short: "Publish sandbox ports on the host's loopback",
		Long: `Forward a TCP port of the host's loopback (127.0.0.1) to a port of a sandbox.
The sandbox's server must listen on all addresses (0.0.0.0), not only on its
own loopback. Published ports are kept with the sandbox across stops. They
need root, and a sandbox with the default network or an --allow-cidr list.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	c.AddCommand(
		&cobra.Command{
			Use:     "publish ID PORT[:SANDBOXPORT]",
			Short:   "Forward host port PORT (0: any free one) to SANDBOXPORT (default: PORT)",
			Example: "  agentbox ports publish default 8080\n  agentbox ports publish default 0:3000",
			Args:    exactArgs(2, "a sandbox id and PORT[:SANDBOXPORT]"),
			RunE: func(cmd *cobra.Command, args []string) error {
				host, inside, err := parsePortSpec(args[1])
				if err != nil {
					return err
				}
				var p sandbox.PublishedPort
				err = a.withHandle(cmd.Context(), args[0], func(h Handle) (err error) {
					p, err = h.PublishPort(cmd.Context(), host, inside)
					return err
				})
				if err != nil {
					return notFound(err, args[0])
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), p)
				}
				fmt.Fprintln(cmd.OutOrStdout(), portText(p))
				return nil
			},
		},
		&cobra.Command{
			Use:     "ls ID",
			Aliases: []string{"list"},
			Short:   "List the published ports of a sandbox",
			Args:    exactArgs(1, "a sandbox id"),
			RunE: func(cmd *cobra.Command, args []string) error {
				in, err := a.lookup(cmd.Context(), args[0])
				if err != nil {
					return notFound(err, args[0])
				}
				var ports []sandbox.PublishedPort
				if in.Network != nil {
					ports = in.Network.Ports
				}
				if a.json {
					if ports == nil {
						ports = []sandbox.PublishedPort{}
					}
					return writeJSON(cmd.OutOrStdout(), ports)
				}
				t := newTable(cmd.OutOrStdout(), "HOST", "SANDBOX PORT")
				for _, p := range ports {
					t.row(p.HostAddress+":"+strconv.Itoa(p.HostPort), strconv.Itoa(p.SandboxPort))
				}
				return t.flush()
			},
		},
		&cobra.Command{
			Use:     "rm ID PORT",
			Aliases: []string{"remove"},
			Short:   "Stop forwarding host port PORT",
			Args:    exactArgs(2, "a sandbox id and a host port"),
			RunE: func(cmd *cobra.Command, args []string) error {
				port, err := strconv.Atoi(args[1])
				if err != nil {
					return usagef("PORT %q is not a number", args[1])
				}
				if err := a.withHandle(cmd.Context(), args[0], func(h Handle) error { return h.UnpublishPort(cmd.Context(), port) }); err != nil {
					return err
				}
				if !a.json {
					fmt.Fprintf(cmd.OutOrStdout(), "unpublished %d\n", port)
				}
				return nil
			},
		},
	)
	return c
}

// parsePortSpec parses PORT[:SANDBOXPORT].
func parsePortSpec(s string) (host, inside int, err error) {
	h, in, found := strings.Cut(s, ":")
	host, err = strconv.Atoi(h)
	if err == nil && found {
		inside, err = strconv.Atoi(in)
	} else if err == nil {
		inside = host
	}
	if err != nil || host < 0 || host > 65535 || inside < 1 || inside > 65535 {
		return 0, 0, usagef("%q is not PORT[:SANDBOXPORT] with ports 1-65535 (host port 0: any free one)", s)
	}
	return host, inside, nil
}
