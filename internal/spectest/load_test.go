package spectest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// endingTB records how a test ended (skipped or failed) instead of ending
// it: its Skipf and Fatal… panic with errEnded after recording.
type endingTB struct {
	testing.TB
	skipped, failed string
}

var errEnded = fmt.Errorf("test ended")

func (e *endingTB) Helper() {}

func (e *endingTB) Skipf(format string, args ...any) {
	e.skipped = fmt.Sprintf(format, args...)
	panic(errEnded)
}

func (e *endingTB) Fatalf(format string, args ...any) {
	e.failed = fmt.Sprintf(format, args...)
	panic(errEnded)
}

func (e *endingTB) Fatal(args ...any) {
	e.failed = fmt.Sprint(args...)
	panic(errEnded)
}

// ending runs f on an endingTB and returns it.
func ending(t *testing.T, f func(testing.TB)) *endingTB {
	e := &endingTB{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != errEnded {
				panic(p)
			}
		}()
		f(e)
	}()
	return e
}

// inCloneWithoutShared moves the test into a module root with no
// ../shared beside it and no AGENTBOX_DAYTONA_SPEC_DIR: a plain clone.
func inCloneWithoutShared(t *testing.T) {
	t.Setenv(spectest.EnvSpecDir, "")
	root := filepath.Join(t.TempDir(), "clone")
	if err := os.MkdirAll(filepath.Join(root, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/clone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(root, "pkg"))
}

// In a clone without ../shared, Load, LoadControlPlane and Dir skip the
// test with a message naming AGENTBOX_DAYTONA_SPEC_DIR; under
// AGENTBOX_REQUIRE_ALL=1 (CI) they fail it instead.
func TestLoadWithoutSpecFiles(t *testing.T) {
	for _, requireAll := range []string{"", "1"} {
		t.Run("AGENTBOX_REQUIRE_ALL="+requireAll, func(t *testing.T) {
			inCloneWithoutShared(t)
			t.Setenv(testenv.EnvRequireAll, requireAll)
			for name, f := range map[string]func(testing.TB){
				"Load":             func(tb testing.TB) { spectest.Load(tb) },
				"LoadControlPlane": func(tb testing.TB) { spectest.LoadControlPlane(tb) },
				"Dir":              func(tb testing.TB) { spectest.Dir(tb) },
			} {
				e := ending(t, f)
				ended, other := e.skipped, e.failed
				if requireAll == "1" {
					ended, other = e.failed, e.skipped
				}
				if other != "" || !strings.Contains(ended, spectest.EnvSpecDir) {
					t.Errorf("%s: skipped %q, failed %q; want one of them (a failure under AGENTBOX_REQUIRE_ALL=1), naming %s", name, e.skipped, e.failed, spectest.EnvSpecDir)
				}
			}
		})
	}
}

// A folder named by AGENTBOX_DAYTONA_SPEC_DIR without the files fails the
// test whatever AGENTBOX_REQUIRE_ALL says: the variable asked for them.
func TestDirFailsOnAWrongSpecDir(t *testing.T) {
	t.Setenv(spectest.EnvSpecDir, t.TempDir())
	t.Setenv(testenv.EnvRequireAll, "")
	if e := ending(t, func(tb testing.TB) { spectest.Dir(tb) }); e.skipped != "" || !strings.Contains(e.failed, spectest.EnvSpecDir) {
		t.Errorf("skipped %q, failed %q; want a failure naming %s", e.skipped, e.failed, spectest.EnvSpecDir)
	}
}
