package testenv_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// fakeTB records what a need did to a test instead of ending it.
type fakeTB struct {
	testing.TB // nil: a method not overridden panics
	skipped    string
	failed     string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Skipf(format string, args ...any) { f.skipped = fmt.Sprintf(format, args...) }

func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

// run calls need on a fake test with AGENTBOX_REQUIRE_ALL set to requireAll.
func run(t *testing.T, requireAll string, need func(testing.TB)) *fakeTB {
	t.Helper()
	t.Setenv(testenv.EnvRequireAll, requireAll)
	f := &fakeTB{}
	need(f)
	return f
}

func TestNeedMet(t *testing.T) {
	for _, all := range []string{"", "1"} {
		f := run(t, all, func(tb testing.TB) { testenv.Need(tb, true, "anything") })
		if f.skipped != "" || f.failed != "" {
			t.Errorf("AGENTBOX_REQUIRE_ALL=%q: a need met skipped (%q) or failed (%q) the test", all, f.skipped, f.failed)
		}
	}
}

// Without AGENTBOX_REQUIRE_ALL=1 a missing need skips, naming the variable.
func TestNeedSkips(t *testing.T) {
	for _, all := range []string{"", "0", "true"} {
		f := run(t, all, func(tb testing.TB) { testenv.Need(tb, false, "needs a unicorn") })
		if f.failed != "" {
			t.Errorf("AGENTBOX_REQUIRE_ALL=%q: failed (%q), want a skip", all, f.failed)
		}
		if !strings.Contains(f.skipped, "needs a unicorn") || !strings.Contains(f.skipped, testenv.EnvRequireAll) {
			t.Errorf("AGENTBOX_REQUIRE_ALL=%q: skip message %q, want the reason and %s", all, f.skipped, testenv.EnvRequireAll)
		}
	}
}

// Under AGENTBOX_REQUIRE_ALL=1 a missing need fails, never skips.
func TestNeedFailsUnderRequireAll(t *testing.T) {
	f := run(t, "1", func(tb testing.TB) { testenv.Need(tb, false, "needs a unicorn") })
	if f.skipped != "" {
		t.Errorf("skipped (%q), want a failure", f.skipped)
	}
	if !strings.Contains(f.failed, "needs a unicorn") || !strings.Contains(f.failed, testenv.EnvRequireAll+"=1") {
		t.Errorf("failure message %q, want the reason and %s=1", f.failed, testenv.EnvRequireAll)
	}
}

func TestSkipf(t *testing.T) {
	f := run(t, "", func(tb testing.TB) { testenv.Skipf(tb, "needs %d unicorns", 3) })
	if f.failed != "" || !strings.Contains(f.skipped, "needs 3 unicorns") || !strings.Contains(f.skipped, testenv.EnvRequireAll) {
		t.Errorf("skip message %q (failure %q), want the formatted reason and %s", f.skipped, f.failed, testenv.EnvRequireAll)
	}
	f = run(t, "1", func(tb testing.TB) { testenv.Skipf(tb, "needs %d unicorns", 3) })
	if f.skipped != "" || !strings.Contains(f.failed, "needs 3 unicorns") {
		t.Errorf("failure message %q (skip %q), want the formatted reason", f.failed, f.skipped)
	}
}

func TestNeedRoot(t *testing.T) {
	f := run(t, "1", func(tb testing.TB) { testenv.NeedRoot(tb, "chown needs root") })
	if root := os.Geteuid() == 0; root != (f.failed == "") {
		t.Errorf("root=%v: failure message %q", root, f.failed)
	}
}

func TestNeedTool(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "agentbox-fake-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	var got string
	f := run(t, "1", func(tb testing.TB) { got = testenv.NeedTool(tb, "agentbox-fake-tool", "fake") })
	if f.failed != "" || got != tool {
		t.Errorf("NeedTool = %q (failure %q), want %q", got, f.failed, tool)
	}
	f = run(t, "", func(tb testing.TB) { testenv.NeedTool(tb, "agentbox-no-such-tool", "nosuch-pkg") })
	if !strings.Contains(f.skipped, "agentbox-no-such-tool") || !strings.Contains(f.skipped, "Debian package nosuch-pkg") {
		t.Errorf("skip message %q, want the tool and its Debian package", f.skipped)
	}
	f = run(t, "1", func(tb testing.TB) { testenv.NeedTool(tb, "agentbox-no-such-tool", "nosuch-pkg") })
	if !strings.Contains(f.failed, "agentbox-no-such-tool") {
		t.Errorf("failure message %q, want the tool", f.failed)
	}
}

func TestNeedFile(t *testing.T) {
	present := t.TempDir()
	f := run(t, "1", func(tb testing.TB) { testenv.NeedFile(tb, present, "needs the folder") })
	if f.failed != "" || f.skipped != "" {
		t.Errorf("a present file skipped (%q) or failed (%q) the test", f.skipped, f.failed)
	}
	absent := filepath.Join(present, "absent")
	f = run(t, "", func(tb testing.TB) { testenv.NeedFile(tb, absent, "needs the file") })
	if !strings.Contains(f.skipped, "needs the file") || !strings.Contains(f.skipped, absent) {
		t.Errorf("skip message %q, want the reason and the path", f.skipped)
	}
	f = run(t, "1", func(tb testing.TB) { testenv.NeedFile(tb, absent, "needs the file") })
	if !strings.Contains(f.failed, absent) {
		t.Errorf("failure message %q, want the path", f.failed)
	}
}
