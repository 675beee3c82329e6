//go:build linux

package local_test

import (
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	stateDir := newStateDir(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		sb, err := local.New(local.Options{StateDir: stateDir})
		if err != nil {
			t.Fatal(err)
		}
		return local.Forkable{Sandbox: sb} // runs the Fork check
	}, sandboxtest.Options{PersistentFiles: true, Reopen: func(sb sandbox.Sandbox) (sandbox.Sandbox, error) {
		return local.New(local.Options{StateDir: stateDir, ID: sb.ID()})
	}})
}
