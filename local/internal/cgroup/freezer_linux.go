package cgroup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The freezer stops every task of a sandbox's cgroup, and of the cgroups
// below it, where it is: memory, sockets and open files stay as they
// are, and the tasks use no CPU until they are thawed. On v1 it is the
// "freezer" controller's hierarchy (freezer.state: THAWED, FREEZING,
// FROZEN); on v2 every non-root cgroup has cgroup.freeze, and
// cgroup.events reports "frozen 1" once every task is frozen.

// ErrNoFreezer: the sandbox's cgroups have no freezer. It matches
// sandbox.ErrUnsupported.
var ErrNoFreezer = fmt.Errorf("%w: the sandbox's cgroups have no freezer (the host mounts no cgroup v1 freezer hierarchy, or the sandbox was started before sandboxes got one: stop and start it)", sandbox.ErrUnsupported)

// freezer names the file of the set's freezer and what is written
// into it to freeze and to thaw.
type freezer struct {
	v2     bool
	dir    string
	file   string // freezer.state or cgroup.freeze
	freeze string // "FROZEN" or "1"
	thaw   string // "THAWED" or "0"
}

// freezer returns the set's freezer, or ErrNoFreezer.
func (s *Set) freezer() (freezer, error) {
	if s == nil {
		return freezer{}, ErrNoFreezer
	}
	var f freezer
	if s.Version == 2 {
		f = freezer{v2: true, dir: s.Paths["unified"], file: "cgroup.freeze", freeze: "1", thaw: "0"}
	} else {
		f = freezer{dir: s.Paths["freezer"], file: "freezer.state", freeze: "FROZEN", thaw: "THAWED"}
	}
	if f.dir == "" {
		return freezer{}, ErrNoFreezer
	}
	if _, err := os.Stat(filepath.Join(f.dir, f.file)); err != nil {
		return freezer{}, fmt.Errorf("%w: %v", ErrNoFreezer, err)
	}
	return f, nil
}

// HasFreezer reports whether the set has a freezer (sets recorded before
// v1 sandboxes got one have none).
func (s *Set) HasFreezer() bool {
	_, err := s.freezer()
	return err == nil
}

// Freeze freezes every task of the set and returns once all are frozen.
// If ctx ends first, it thaws them again and returns ctx's error. Freeze
// of a frozen set does nothing.
func (s *Set) Freeze(ctx context.Context) error {
	f, err := s.freezer()
	if err != nil {
		return err
	}
	if err := f.write(f.freeze); err != nil {
		return err
	}
	if err := f.wait(ctx, true); err != nil {
		_ = f.write(f.thaw)
		return err
	}
	return nil
}

// Thaw lets every task of the set run again and returns once none is
// frozen. Thaw of a set without a freezer, or of one not frozen, does
// nothing.
func (s *Set) Thaw(ctx context.Context) error {
	f, err := s.freezer()
	if err != nil {
		return nil
	}
	if err := f.write(f.thaw); err != nil {
		return err
	}
	return f.wait(ctx, false)
}

// Frozen reports whether every task of the set is frozen (false without a
// freezer).
func (s *Set) Frozen() bool {
	f, err := s.freezer()
	if err != nil {
		return false
	}
	frozen, err := f.frozen()
	return err == nil && frozen
}

// write writes v into the freezer's file.
func (f freezer) write(v string) error {
	if err := os.WriteFile(filepath.Join(f.dir, f.file), []byte(v), 0); err != nil {
		return fmt.Errorf("cgroup %s: write %s to %s: %w", f.dir, v, f.file, err)
	}
	return nil
}

// frozen reads whether every task of the freezer's cgroup is frozen.
func (f freezer) frozen() (bool, error) {
	file := "freezer.state"
	if f.v2 {
		file = "cgroup.events"
	}
	b, err := os.ReadFile(filepath.Join(f.dir, file))
	if err != nil {
		return false, fmt.Errorf("cgroup %s: read %s: %w", f.dir, file, err)
	}
	if f.v2 {
		return eventsFrozen(string(b))
	}
	return stateFrozen(string(b))
}

// wait waits until the freezer's cgroup is frozen (want) or thawed. On
// v1 a FREEZING cgroup (a task in the kernel that could not stop yet) is
// asked again at every check.
func (f freezer) wait(ctx context.Context, want bool) error {
	delay := 50 * time.Microsecond
	for {
		got, err := f.frozen()
		if err != nil {
			return err
		}
		if got == want {
			return nil
		}
		if want && !f.v2 {
			_ = f.write(f.freeze)
		}
		select {
		case <-ctx.Done():
			what := "thaw"
			if want {
				what = "freeze"
			}
			return fmt.Errorf("cgroup %s: %s: %w", f.dir, what, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// stateFrozen parses a v1 freezer.state: FROZEN is frozen, THAWED and
// FREEZING are not.
func stateFrozen(s string) (bool, error) {
	switch strings.TrimSpace(s) {
	case "FROZEN":
		return true, nil
	case "THAWED", "FREEZING":
		return false, nil
	}
	return false, fmt.Errorf("unknown freezer state %q", strings.TrimSpace(s))
}

// eventsFrozen parses a v2 cgroup.events for its "frozen" key.
func eventsFrozen(s string) (bool, error) {
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		if k == "frozen" {
			return v == "1", nil
		}
	}
	return false, fmt.Errorf("cgroup.events has no frozen key (the kernel is older than 5.2): %q", s)
}
