//go:build !linux

package cgroup

import (
	"context"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Destroy does nothing: no cgroup is made here.
func (s *Set) Destroy(context.Context) error { return nil }

// Resources returns nil: no cgroup is made here.
func (s *Set) Resources() *sandbox.Usage { return nil }
