//go:build !linux

package rodir

import (
	"errors"
	"testing"
)

// bindReadOnly reports that bind mounts are Linux's.
func bindReadOnly(testing.TB, string) error {
	return errors.New("bind mounts need Linux")
}
