//go:build !linux

package local

import "context"

// reclaimStrays does nothing: no init runs here.
func reclaimStrays(context.Context, string, string, *meta) {}
