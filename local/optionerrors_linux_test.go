package local_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestNetworkNeedsRootErrorNamesFields: the error of the default network
// without root names the library's fields that work without root, as a
// *sandbox.OptionError that a front end can name its way, and matches
// sandbox.ErrIsolationUnavailable.
func TestNetworkNeedsRootErrorNamesFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    local.Config
		says string
		opts []sandbox.Option
	}{
		{"default", local.Config{}, "The default network (the public internet only) needs root",
			[]sandbox.Option{sandbox.OptionNetworkBlocked, sandbox.OptionNetworkDomains, sandbox.OptionNetworkHost}},
		{"allow list", local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}},
			"An allow list of address ranges (Network.Allow) needs root",
			[]sandbox.Option{sandbox.OptionNetworkAllow, sandbox.OptionNetworkBlocked, sandbox.OptionNetworkDomains, sandbox.OptionNetworkHost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fmt.Errorf("start: %w", local.NetworkNeedsRootError(&tc.c, errors.New("open /dev/net/tun: permission denied")))
			if !errors.Is(err, sandbox.ErrIsolationUnavailable) {
				t.Errorf("%v does not match ErrIsolationUnavailable", err)
			}
			var oe *sandbox.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("%v is no *sandbox.OptionError", err)
			}
			if got := oe.Options(); !slices.Equal(got, tc.opts) {
				t.Errorf("it names %q, want %q", got, tc.opts)
			}
			msg := err.Error()
			for _, s := range []string{tc.says, "(Network.Mode blocked)", "(Network.Domains;", "(Network.Mode host)"} {
				if !strings.Contains(msg, s) {
					t.Errorf("%q does not say %q", msg, s)
				}
			}
		})
	}
}
