package sandbox_test

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestOptionError: the message names the options as the library does,
// Message names them as the caller's function does, and the error
// matches its kind and cause through wrapping.
func TestOptionError(t *testing.T) {
	cause := fs.ErrNotExist
	oe := sandbox.NewOptionError(sandbox.ErrIsolationUnavailable, "use ", sandbox.OptionNetworkBlocked, " or ", sandbox.OptionImage, " (", 3, "%s)").WithCause(cause)
	err := fmt.Errorf("cannot start sandbox %q: %w", "x", oe)

	want := "isolation unavailable: use Network.Mode blocked or Image (3%s): " + cause.Error()
	if got := oe.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	flag := func(o sandbox.Option) string { return "--" + strings.ToLower(strings.ReplaceAll(string(o), " ", "-")) }
	if got, want := oe.Message(flag), "isolation unavailable: use --network.mode-blocked or --image (3%s): "+cause.Error(); got != want {
		t.Errorf("Message(flag) = %q, want %q", got, want)
	}
	var as *sandbox.OptionError
	if !errors.As(err, &as) || as != oe {
		t.Fatalf("errors.As(%v) found %v, want the OptionError", err, as)
	}
	if got := as.Options(); !slices.Equal(got, []sandbox.Option{sandbox.OptionNetworkBlocked, sandbox.OptionImage}) {
		t.Errorf("Options() = %q", got)
	}
	if !errors.Is(err, sandbox.ErrIsolationUnavailable) || !errors.Is(err, cause) {
		t.Errorf("%v does not match its kind and cause", err)
	}
	if errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("%v matches ErrInvalidArgument", err)
	}
	if got := sandbox.NewOptionError(nil, sandbox.OptionAllowFUSE, ": no /dev/fuse").Error(); got != "Confinement.AllowFUSE: no /dev/fuse" {
		t.Errorf("without a kind: %q", got)
	}
}
