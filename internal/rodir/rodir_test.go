package rodir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/rodir"
)

func TestNewRefusesWrites(t *testing.T) {
	dir := rodir.New(t)
	err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600)
	if err == nil {
		t.Fatalf("wrote into %s, want an error", dir)
	}
	if !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EROFS) {
		t.Errorf("write error %v, want permission denied or read-only file system", err)
	}
}
