// Package testenv holds the rule for tests that need something of the host
// (root, a tool, a device, a file): without it the test is skipped, saying
// what is missing, unless the environment variable AGENTBOX_REQUIRE_ALL is
// 1 (as in CI), where every test must run and a missing need fails it.
//
// It plays the part of Go's internal/testenv (MustHaveExec and the like)
// for this module:
//
//	testenv.NeedRoot(t, "changing a file's owner needs root")
//	git := testenv.NeedTool(t, "git", "git")
//	testenv.Need(t, local.FUSEAvailable(), "needs /dev/fuse and root")
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// EnvRequireAll names the environment variable that, set to 1, turns every
// skip of this package into a failure.
const EnvRequireAll = "AGENTBOX_REQUIRE_ALL"

// RequireAll reports whether every test must run (AGENTBOX_REQUIRE_ALL=1).
func RequireAll() bool { return os.Getenv(EnvRequireAll) == "1" }

// Need returns when ok. Otherwise it skips t saying why, or fails t under
// AGENTBOX_REQUIRE_ALL=1.
func Need(t testing.TB, ok bool, why string) {
	t.Helper()
	if !ok {
		Skip(t, why)
	}
}

// Skip skips t saying why and naming AGENTBOX_REQUIRE_ALL, or fails t
// under AGENTBOX_REQUIRE_ALL=1: for a test that found a need of its own
// missing.
func Skip(t testing.TB, why string) {
	t.Helper()
	if RequireAll() {
		t.Fatalf("cannot run (%s=1): %s", EnvRequireAll, why)
		return
	}
	t.Skipf("%s (skipped; %s=1 makes this a failure)", why, EnvRequireAll)
}

// Skipf is Skip with a reason formatted as fmt.Sprintf does.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	Skip(t, fmt.Sprintf(format, args...))
}

// NeedRoot needs the test to run as root (effective uid 0); why says what
// needs it.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	Need(t, os.Geteuid() == 0, why)
}

// NeedTool needs the program name in PATH and returns its path;
// debianPkg names the Debian package that installs it.
func NeedTool(t testing.TB, name, debianPkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skipf(t, "%s is not installed (Debian package %s): %v", name, debianPkg, err)
	}
	return p
}

// NeedFile needs path to exist (a device such as /dev/fuse, a program of
// the host); why says what needs it.
func NeedFile(t testing.TB, path, why string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Skipf(t, "%s: %v", why, err)
	}
}
