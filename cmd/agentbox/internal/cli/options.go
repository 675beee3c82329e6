package cli

import (
	"errors"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// optionFlag is the CLI's options table: how agentbox's messages name
// the library option o, by the flag (or command) that sets it. An option
// the CLI does not offer is named as the library's, saying so.
func optionFlag(o sandbox.Option) string {
	switch o {
	case sandbox.OptionNetworkBlocked:
		return "--block-network"
	case sandbox.OptionNetworkDomains:
		return "agentbox sandbox network ID --allow-domain LIST"
	case sandbox.OptionNetworkAllow:
		return "agentbox sandbox network ID --allow-cidr LIST"
	case sandbox.OptionImage:
		return "--image"
	case sandbox.OptionSnapshot:
		return "--snapshot"
	case sandbox.OptionReadOnlyRoot:
		return "--read-only-root"
	case sandbox.OptionAllowFUSE:
		return "--allow-fuse"
	case sandbox.OptionDiskMiB:
		return "--disk"
	}
	return "the library's " + string(o) + ", which the CLI does not offer"
}

// cliMessage returns the message of err, the options its
// [*sandbox.OptionError] names given as the CLI's flags (optionFlag).
func cliMessage(err error) string {
	msg := err.Error()
	var oe *sandbox.OptionError
	if errors.As(err, &oe) {
		msg = strings.Replace(msg, oe.Error(), oe.Message(optionFlag), 1)
	}
	return msg
}
