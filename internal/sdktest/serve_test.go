package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/local"
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
	if os.Geteuid() != 0 {
		unavailable(t, "agentbox serve's sandboxes need root here (the local engine's default network)")
	}
	dir := t.TempDir()
	t.Cleanup(func() { removeLeftSandboxes(t, dir) })
	srv, err := server.New(server.Options{StateDir: dir, APIKeys: []string{apiKey}})
	if err != nil {
		t.Fatal(err)
	}
	offSpec := &collector{TB: t}
	cp := spectest.LoadControlPlane(t).WithBasePath("/api")
	tb := spectest.Load(t).ResponsesOnly().SkipBodiesOver(1 << 20)
	var streams atomic.Int32 // event streams opened
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/socket.io/") {
			streams.Add(1)
		}
		srv.ServeHTTP(w, r)
	})
	base := serveLoopback(t, spectest.ServerHandler(offSpec, cp, tb, counted), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return srv.Close(ctx)
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
	want := []struct{ name, value string }{
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
	}
	if len(results) != len(want) {
		t.Fatalf("serve.mjs reported %d steps, want %d: %+v", len(results), len(want), results)
	}
	for i, w := range want {
		r := results[i]
		t.Run(w.name, func(t *testing.T) {
			if r.Name != w.name {
				t.Fatalf("step %d is %q, want %q", i, r.Name, w.name)
			}
			if !r.OK {
				t.Fatal(r.failure())
			}
			var got, exp any
			if err := json.Unmarshal(r.Value, &got); err != nil {
				t.Fatalf("value %s: %v", r.Value, err)
			}
			if err := json.Unmarshal([]byte(w.value), &exp); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("value %s, want %s", r.Value, w.value)
			}
		})
	}
}

// runServeProgram runs testdata/node/serve.mjs with the SDK release alias
// against the server at base, on a sandbox of that name.
func runServeProgram(t *testing.T, p nodeProject, base, alias, name string) serveReport {
	t.Helper()
	stdout, runErr := p.runNode(t, "serve.mjs", base, alias, "AGENTBOX_SANDBOX_NAME="+name)
	lines := bytes.Split(bytes.TrimSpace(stdout), []byte("\n"))
	var rep serveReport
	if err := json.Unmarshal(lines[len(lines)-1], &rep); err != nil || runErr != nil {
		t.Fatalf("node serve.mjs printed no report (exit: %v, decoding: %v):\n%s", runErr, err, stdout)
	}
	var timing strings.Builder
	for _, r := range rep.Steps {
		timing.WriteString(" " + r.Name + " " + time.Duration(r.Ms*int(time.Millisecond)).String() + ";")
	}
	t.Logf("SDK %s steps:%s", rep.SDK, timing.String())
	return rep
}

// removeLeftSandboxes fails the test for every sandbox left in stateDir,
// and removes it.
func removeLeftSandboxes(t *testing.T, stateDir string) {
	ctx := context.Background()
	infos, err := local.List(ctx, stateDir)
	if err != nil {
		t.Errorf("listing the sandboxes left: %v", err)
	}
	for _, info := range infos {
		t.Errorf("sandbox %s left behind", info.ID)
		if err := local.Remove(ctx, stateDir, info.ID); err != nil {
			t.Errorf("removing %s: %v", info.ID, err)
		}
	}
}
