//go:build !linux

package server

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
)

// dialLongPath fails: local sandboxes need Linux.
func dialLongPath(ctx context.Context, dir, name string) (net.Conn, error) {
	return nil, fmt.Errorf("toolbox socket %s: path too long for a unix socket address", filepath.Join(dir, name))
}
