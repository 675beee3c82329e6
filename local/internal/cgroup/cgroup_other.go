//go:build !linux

package cgroup

import (
	"context"
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Destroy does nothing: no cgroup is made here.
func (s *Set) Destroy(context.Context) error { return nil }

// Resources returns nil: no cgroup is made here.
func (s *Set) Resources() *sandbox.Usage { return nil }

// ErrNoFreezer: no cgroup is made here, so there is no freezer. It
// matches sandbox.ErrUnsupported.
var ErrNoFreezer = fmt.Errorf("%w: this system has no cgroup freezer", sandbox.ErrUnsupported)

// Freeze fails with ErrNoFreezer: no cgroup is made here.
func (s *Set) Freeze(context.Context) error { return ErrNoFreezer }

// Thaw does nothing: no cgroup is made here.
func (s *Set) Thaw(context.Context) error { return nil }

// Frozen returns false: no cgroup is made here.
func (s *Set) Frozen() bool { return false }

// HasFreezer returns false: no cgroup is made here.
func (s *Set) HasFreezer() bool { return false }
