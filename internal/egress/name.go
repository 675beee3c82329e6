package egress

import "github.com/agentbox-dev/agentbox/internal/hostname"

// maxNameLen is the longest name DNS carries (hostname.MaxNameLen).
const maxNameLen = hostname.MaxNameLen

// Names are read by package internal/hostname, as the sandbox spec reads
// the entries of a domain allow list.
var (
	errIPLiteral = hostname.ErrIPLiteral
	errNonASCII  = hostname.ErrNonASCII
)

// canonicalName is hostname.Canonical.
func canonicalName(s string) (string, error) { return hostname.Canonical(s) }

// isIPLiteral is hostname.IsIPLiteral.
func isIPLiteral(s string) bool { return hostname.IsIPLiteral(s) }

// printable is hostname.Printable: hosts in refusals come from the
// sandbox.
func printable(s string) string { return hostname.Printable(s) }
