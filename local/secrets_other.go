//go:build !linux

package local

import (
	"context"
	"runtime"
)

// applySecretsLive fails: no sandbox runs here.
func (s *Sandbox) applySecretsLive(context.Context, *meta, []secretRecord, []heldSecret) error {
	return checkPlatform(runtime.GOOS)
}
