//go:build linux

package local_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestConfinementInfo: Info (Metadata "syscallFilter" and "landlock") and
// Instructions say what confines the commands, before the first start as
// after, and a later handle adopts the sandbox's own Confinement.
func TestConfinementInfo(t *testing.T) {
	ctx := context.Background()
	landlock := "not available in this kernel"
	if abi := kernelLandlockABI(); abi >= 6 {
		landlock = fmt.Sprintf("ABI %d: abstract unix sockets and signals scoped to the sandbox", abi)
	} else if abi > 0 {
		landlock = fmt.Sprintf("ABI %d: not used (scoping needs ABI 6)", abi)
	}
	for _, tc := range []struct {
		c                 local.Confinement
		filter, landlock  string
		instructions, not string
	}{
		{local.Confinement{}, "default", landlock, "mounting and new namespaces", "nested user namespaces"},
		{local.Confinement{AllowNestedNamespaces: true}, "default, nested namespaces allowed", landlock, "nested user namespaces, mounting inside them and setns are allowed", "new namespaces;"},
		{local.Confinement{Unconfined: true}, "off (Confinement.Unconfined)", "off (Confinement.Unconfined)", "without a system call filter or Landlock", "refuses"},
	} {
		stateDir := newStateDir(t)
		sb := openSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{Confinement: tc.c}})
		check := func(when string, sb *local.Sandbox) {
			t.Helper()
			info, err := sb.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Metadata["syscallFilter"]; got != tc.filter {
				t.Errorf("%+v %s: syscallFilter %q, want %q", tc.c, when, got, tc.filter)
			}
			if got := info.Metadata["landlock"]; got != tc.landlock {
				t.Errorf("%+v %s: landlock %q, want %q", tc.c, when, got, tc.landlock)
			}
			ins := sb.Instructions()
			if !strings.Contains(ins, tc.instructions) || strings.Contains(ins, tc.not) {
				t.Errorf("%+v %s: instructions %q: want %q, not %q", tc.c, when, ins, tc.instructions, tc.not)
			}
		}
		check("before start", sb)
		if _, err := sb.Start(ctx); err != nil {
			t.Fatal(err)
		}
		check("running", sb)
		// Another handle adopts the sandbox's Confinement.
		other, err := local.New(local.Options{ID: sb.ID(), StateDir: stateDir})
		if err != nil {
			t.Fatal(err)
		}
		if outcome, err := other.Start(ctx); err != nil || outcome != sandbox.OutcomeConnected {
			t.Fatalf("second handle: %v %v", outcome, err)
		}
		check("second handle", other)
	}
}
