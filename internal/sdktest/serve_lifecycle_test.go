package sdktest

import "testing"

// TestTypeScriptSDKServeLifecycle has each SDK release drive issue 27's
// calls against agentbox serve (testdata/node/lifecycle.mjs): a fork
// keeps the files and diverges; a pause keeps a Python process's memory
// (the same process counts on after pause and start); a snapshot of a
// running sandbox makes sandboxes with its files; refreshActivity.
func TestTypeScriptSDKServeLifecycle(t *testing.T) {
	p := findNode(t)
	base, offSpec := serveWithImage(t)
	t.Run("sdk", func(t *testing.T) {
		for _, alias := range aliases {
			t.Run(p.versions[alias], func(t *testing.T) {
				t.Parallel()
				name := "sdktest-life-" + alias
				runProgram(t, p, "lifecycle.mjs", base, alias, []wantStep{
					{"create", `"started"`},
					{"fork", `{"state":"started","seen":"before","source":"before","sourceG":"no"}`},
					{"pause-keeps-memory", `{"paused":"paused","started":"started","sameProcess":true,"counted":true}`},
					{"refresh-activity", `"ok"`},
					{"snapshot-running", `"started"`},
					{"create-from-snapshot", `"in-snapshot"`},
					{"delete", `"ok"`},
				}, "AGENTBOX_SANDBOX_NAME="+name, "AGENTBOX_BASE_IMAGE="+testBaseImage)
			})
		}
	})
	t.Run("spec", func(t *testing.T) { offSpec.report(t) })
}
