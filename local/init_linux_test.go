package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestRunSteps: the init's steps run in order, the first failure stops
// them, and the error names the step; the host reports it as the init's.
func TestRunSteps(t *testing.T) {
	var ran []string
	step := func(name string, err error) initStep {
		return initStep{name, func() error { ran = append(ran, name); return err }}
	}
	boom := errors.New("operation not permitted")
	err := runSteps([]initStep{step("a", nil), step("mount /proc", boom), step("c", nil)})
	if !errors.Is(err, boom) || err.Error() != `step "mount /proc": operation not permitted` {
		t.Errorf("runSteps: %v, want the failed step named", err)
	}
	if got := strings.Join(ran, ","); got != "a,mount /proc" {
		t.Errorf("steps run: %s", got)
	}
	if err := initError(err.Error()); !errors.Is(err, sandbox.ErrIsolationUnavailable) || !strings.HasSuffix(err.Error(), `: sandbox init: step "mount /proc": operation not permitted`) {
		t.Errorf("host error: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range initSteps(&initConfig{}, nil) {
		if s.name == "" || seen[s.name] || s.run == nil {
			t.Errorf("init step %q: empty, repeated or without a function", s.name)
		}
		seen[s.name] = true
	}
}
