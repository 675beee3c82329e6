package local

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestCheckPlatform: local sandboxes run on Linux only; elsewhere the error
// says they need Linux and matches ErrIsolationUnavailable.
func TestCheckPlatform(t *testing.T) {
	if err := checkPlatform("linux"); err != nil {
		t.Errorf("checkPlatform(linux): %v", err)
	}
	for _, goos := range []string{"darwin", "windows", "freebsd"} {
		err := checkPlatform(goos)
		if !errors.Is(err, sandbox.ErrIsolationUnavailable) || !strings.Contains(err.Error(), "need Linux") {
			t.Errorf("checkPlatform(%s): %v, want ErrIsolationUnavailable saying local sandboxes need Linux", goos, err)
		}
	}
}

// TestNewOnThisPlatform: New validates everywhere; it succeeds on Linux and
// fails with ErrIsolationUnavailable elsewhere.
func TestNewOnThisPlatform(t *testing.T) {
	if _, err := New(Options{StateDir: t.TempDir(), Config: Config{User: "Bad User"}}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("New with a bad user: %v, want ErrInvalidArgument", err)
	}
	sb, err := New(Options{StateDir: t.TempDir()})
	if runtime.GOOS == "linux" {
		if err != nil {
			t.Fatalf("New on Linux: %v", err)
		}
		sb.Client().Close()
		return
	}
	if !errors.Is(err, sandbox.ErrIsolationUnavailable) {
		t.Errorf("New on %s: %v, want ErrIsolationUnavailable", runtime.GOOS, err)
	}
}
