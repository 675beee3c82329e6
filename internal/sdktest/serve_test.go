package sdktest

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// serveReport is what testdata/node/serve.mjs prints.
type serveReport struct {
	SDK   string       `json:"sdk"`
	Steps []stepResult `json:"steps"`
}

// TestTypeScriptSDKServe drives one sandbox of agentbox serve (package
// daytona/server over the local engine: real sandboxes) through its life
// with each SDK release, every exchange checked against the spec files,
// state changes learnt from the Socket.IO event stream as the SDKs do by
// default:
// create, work and home dirs, exec, a session, upload, get by name, list
// by label, a preview URL fetched through serve, labels, stop, archive, start (restoring: files and env
// kept), delete.
func TestTypeScriptSDKServe(t *testing.T) {
	p := findNode(t)
	var streams atomic.Int32 // event streams opened
	base, offSpec := startServe(t, t.TempDir(), func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/socket.io/") {
				streams.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	// A group, so that its parallel subtests end before the checks below.
	t.Run("sdk", func(t *testing.T) {
		for _, alias := range aliases {
			version := p.versions[alias]
			t.Run(version, func(t *testing.T) {
				t.Parallel()
				name := "sdktest-serve-" + alias
				rep := runServeProgram(t, p, base, alias, name)
				if rep.SDK != version {
					t.Errorf("the program ran SDK %s, want %s", rep.SDK, version)
				}
				checkServeSteps(t, rep.Steps, name)
			})
		}
	})
	t.Run("spec", func(t *testing.T) { offSpec.report(t) })
	t.Run("event-stream", func(t *testing.T) {
		// The SDKs learn of state changes through it by default.
		if n := streams.Load(); n == 0 {
			t.Fatal("no SDK opened the event stream (GET /api/socket.io/)")
		}
	})
}

// checkServeSteps checks every step serve.mjs reports.
func checkServeSteps(t *testing.T, results []stepResult, name string) {
	checkReported(t, "serve.mjs", results, []wantStep{
		{"create", `{"state":"started","user":"daytona","name":"` + name + `","labels":{"suite":"` + name + `","code-toolbox-language":"python"}}`},
		{"work-dir", `"/home/daytona"`},
		{"home-dir", `"/home/daytona"`},
		{"exec", `{"exitCode":3,"result":"daytona /home/daytona /home/daytona hello\n"}`},
		{"session", `{"exitCode":0,"stdout":"one\n","stderr":"two\n"}`},
		{"upload", `19`},
		{"preview", `{"status":200,"body":"previewed\n","host":true}`},
		{"get-by-name", `{"id":true,"state":"started"}`},
		{"list-by-label", `["` + name + `"]`},
		{"set-labels", `{"suite":"` + name + `","step":"labels"}`},
		{"stop", `"stopped"`},
		{"archive", `"archived"`},
		{"start", `"started"`},
		{"download-after-restart", `"kept across a stop\n"`},
		{"env-after-restart", `{"exitCode":0,"result":"hello\n"}`},
		{"delete", `"destroying"`},
		{"get-after-delete", `{"type":"DaytonaNotFoundError","status":404}`},
	})
}

// runServeProgram runs testdata/node/serve.mjs with the SDK release alias
// against the server at base, on a sandbox of that name.
func runServeProgram(t *testing.T, p nodeProject, base, alias, name string) serveReport {
	t.Helper()
	return runReport(t, p, "serve.mjs", base, alias, "AGENTBOX_SANDBOX_NAME="+name)
}
