package local

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestRunSteps: the init's steps run in order, the first failure stops
// them, and the error names the step; the host reports it as the init's.
func TestRunSteps(t *testing.T) {
	var ran []string
	step := func(name string, err error) namedStep {
		return namedStep{name, func() error { ran = append(ran, name); return err }}
	}
	boom := errors.New("operation not permitted")
	err := runSteps([]namedStep{step("a", nil), step("mount /proc", boom), step("c", nil)})
	if !errors.Is(err, boom) || err.Error() != `step "mount /proc": operation not permitted` {
		t.Errorf("runSteps: %v, want the failed step named", err)
	}
	if got := strings.Join(ran, ","); got != "a,mount /proc" {
		t.Errorf("steps run: %s", got)
	}
	if err := initError(err.Error()); !errors.Is(err, sandbox.ErrIsolationUnavailable) || !strings.HasSuffix(err.Error(), `: sandbox init: step "mount /proc": operation not permitted`) {
		t.Errorf("host error: %v", err)
	}
	stepNames(t, initSteps(&initConfig{}, nil))
}

// stepNames returns the names of steps, checking that each is named once
// and has a function.
func stepNames(t *testing.T, steps []namedStep) []string {
	t.Helper()
	var names []string
	for _, s := range steps {
		if s.name == "" || slices.Contains(names, s.name) || s.run == nil {
			t.Errorf("step %q: empty, repeated or without a function", s.name)
		}
		names = append(names, s.name)
	}
	return names
}

// TestCommandThreadSteps: the command thread's confinement is named steps
// of its setup, Landlock scoping then the system call filter, after the
// thread joined the commands' cgroups and its cgroup namespace; unconfined
// without FUSE, those steps load nothing.
func TestCommandThreadSteps(t *testing.T) {
	fd := 7
	steps := commandThreadSteps(&initConfig{}, nil, &fd)
	want := []string{"join the commands' cgroups", "unshare a cgroup namespace", "confine commands: Landlock scoping", "confine commands: system call filter"}
	if got := stepNames(t, steps); !slices.Equal(got, want) {
		t.Errorf("command thread steps %q, want %q", got, want)
	}
	c := Confinement{Unconfined: true}
	if err := c.scopeThread(); err != nil {
		t.Errorf("scopeThread unconfined: %v", err)
	}
	if n, err := c.filterThread(); n != -1 || err != nil {
		t.Errorf("filterThread unconfined: %d, %v; want -1, nil (no filter)", n, err)
	}
}

// TestBootSteps: a start runs as named steps, the init started before it
// is recorded and waited for, volumes mounted again last.
func TestBootSteps(t *testing.T) {
	names := stepNames(t, (&booting{}).steps())
	at := func(n string) int {
		i := slices.Index(names, n)
		if i < 0 {
			t.Fatalf("no boot step %q in %q", n, names)
		}
		return i
	}
	if !(at("claim host ids and apply limits") < at("start the init") && at("start the init") < at("record the init and wait for it") && at("mount volumes again") == len(names)-1) {
		t.Errorf("boot steps out of order: %q", names)
	}
}
