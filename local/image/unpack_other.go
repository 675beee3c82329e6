//go:build !linux

package image

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// errLinuxOnly: layers are overlayfs folders, made with Linux system calls
// (openat2, whiteout devices, trusted xattrs).
var errLinuxOnly = fmt.Errorf("image layers are unpacked on Linux only: %w", errors.ErrUnsupported)

func unpack(ctx context.Context, r io.Reader, dst string) (int64, error) { return 0, errLinuxOnly }

func writeTar(ctx context.Context, dir string, w io.Writer, strict bool) (int64, error) {
	return 0, errLinuxOnly
}
