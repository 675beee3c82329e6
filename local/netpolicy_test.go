//go:build linux

package local_test

import (
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// netPolicy returns the policy of Daytona's wire form (networkBlockAll,
// networkAllowList, domainAllowList), failing tb when it is invalid.
func netPolicy(tb testing.TB, blockAll bool, allowList, domainAllowList string) sandbox.NetworkPolicy {
	tb.Helper()
	p, err := sandbox.ParseNetworkPolicy(blockAll, allowList, domainAllowList)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
