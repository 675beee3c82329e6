package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
)

// testBaseImage is the image of serve's store the image tests build on:
// a small root of the host's programs (internal/testrootfs).
const testBaseImage = "agentbox-test/base:1"

// serveWithImage starts agentbox serve (startServe) over a state dir
// whose image store has testBaseImage.
func serveWithImage(t *testing.T) (string, *collector) {
	t.Helper()
	dir := t.TempDir()
	st, err := local.OpenImageStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	testrootfs.SaveImage(t, st, testBaseImage)
	return startServe(t, dir, nil)
}

// startServe starts agentbox serve on loopback over stateDir, behind wrap
// when it is not nil, every exchange checked against the spec files (the
// collector gathers the mismatches), and returns its URL. The test fails
// for every sandbox left in stateDir at its end.
func startServe(t *testing.T, stateDir string, wrap func(http.Handler) http.Handler) (string, *collector) {
	t.Helper()
	// The base image of the tests is the operator's, published to tenants.
	// Host-based preview URLs under localhost, which serve.mjs checks
	// (preview.mjs checks the default form).
	return startServeOptions(t, server.Options{StateDir: stateDir, APIKeys: []string{apiKey}, PublishedImages: []string{testBaseImage}, PreviewDomain: "localhost"}, wrap)
}

// startServeOptions is startServe of a server of opts.
func startServeOptions(t *testing.T, opts server.Options, wrap func(http.Handler) http.Handler) (string, *collector) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skipf(t, "agentbox serve's sandboxes need root here (the local engine's default network)")
	}
	t.Cleanup(func() { localtest.CheckNoneLeft(t, opts.StateDir) })
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(srv)
	}
	offSpec := &collector{TB: t}
	cp := spectest.LoadControlPlane(t).WithBasePath("/api")
	tb := spectest.Load(t).ResponsesOnly().SkipBodiesOver(1 << 20)
	base := serveLoopback(t, spectest.ServerHandler(offSpec, cp, tb, h), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return srv.Close(ctx)
	})
	return base, offSpec
}

// wantStep is a step a program must report, with its value as JSON.
type wantStep struct{ name, value string }

// runProgram runs the node program script with the SDK release alias
// against the server at base, with the extra environment env, and checks
// that it reports the steps want.
func runProgram(t *testing.T, p nodeProject, script, base, alias string, want []wantStep, env ...string) {
	t.Helper()
	rep := runReport(t, p, script, base, alias, env...)
	checkReported(t, script, rep.Steps, want)
}

// runReport runs the node program script with the SDK release alias
// against the server at base, with the extra environment env, and
// returns the report it prints (steps.mjs), logging how long each step
// took.
func runReport(t *testing.T, p nodeProject, script, base, alias string, env ...string) serveReport {
	t.Helper()
	stdout, runErr := p.runNode(t, script, base, alias, env...)
	lines := bytes.Split(bytes.TrimSpace(stdout), []byte("\n"))
	var rep serveReport
	if err := json.Unmarshal(lines[len(lines)-1], &rep); err != nil || runErr != nil {
		t.Fatalf("node %s printed no report (exit: %v, decoding: %v):\n%s", script, runErr, err, stdout)
	}
	var timing strings.Builder
	for _, r := range rep.Steps {
		timing.WriteString(" " + r.Name + " " + (time.Duration(r.Ms) * time.Millisecond).String() + ";")
	}
	t.Logf("%s with %s: steps:%s", script, rep.SDK, timing.String())
	return rep
}

// checkReported checks that the steps a program reported are want.
func checkReported(t *testing.T, script string, results []stepResult, want []wantStep) {
	t.Helper()
	if len(results) != len(want) {
		t.Fatalf("%s reported %d steps, want %d: %+v", script, len(results), len(want), results)
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

// TestTypeScriptSDKServeImages has each SDK release create sandboxes of
// agentbox serve from images (testdata/node/image.mjs): a declarative
// image built by the local image builder, its build logs streamed to the
// SDK; a snapshot made of an image name, listed, used and deleted.
func TestTypeScriptSDKServeImages(t *testing.T) {
	p := findNode(t)
	base, offSpec := serveWithImage(t)
	t.Run("sdk", func(t *testing.T) {
		for _, alias := range aliases {
			t.Run(p.versions[alias], func(t *testing.T) {
				t.Parallel()
				name := "sdktest-image-" + alias
				runProgram(t, p, "image.mjs", base, alias, []wantStep{
					{"create-by-image", `{"state":"started","dockerfile":"FROM ` + testBaseImage + `\nRUN echo built-by-sdk > /built && echo run-step-output\n","logsFrom":true,"logsRun":true}`},
					{"exec-built", `{"exitCode":0,"result":"built-by-sdk\n"}`},
					{"delete-built", `"destroying"`},
					{"snapshot-create", `{"name":"` + name + `-snap","state":"active","imageName":"` + testBaseImage + `","logged":true}`},
					{"snapshot-get", `{"name":"` + name + `-snap","state":"active"}`},
					{"snapshot-list", `["agentbox-host","` + name + `-snap"]`},
					{"create-from-snapshot", `{"snapshot":"` + name + `-snap","os":` + jsonString(testrootfs.OSRelease) + `}`},
					{"snapshot-delete", `{"type":"DaytonaNotFoundError","status":404}`},
				}, "AGENTBOX_SANDBOX_NAME="+name, "AGENTBOX_BASE_IMAGE="+testBaseImage)
			})
		}
	})
	t.Run("spec", func(t *testing.T) { offSpec.report(t) })
}

// TestMastraServe drives agentbox serve with Mastra's DaytonaSandbox
// (testdata/node/mastra.mjs): created of a snapshot, commands, streamed
// output, background processes, stop and start keeping files, destroy;
// and created of an image, built by serve, with its build logs.
func TestMastraServe(t *testing.T) {
	p := findNode(t)
	if _, err := os.Stat(filepath.Join(p.dir, "node_modules", "@mastra", "daytona", "package.json")); err != nil {
		testenv.Skipf(t, "Mastra's @mastra/daytona is not installed (%v): run scripts/test.sh, or npm ci --ignore-scripts --prefix %s", err, p.dir)
	}
	base, offSpec := serveWithImage(t)
	const name = "sdktest-mastra"
	runProgram(t, p, "mastra.mjs", base, "", []wantStep{
		{"start-by-snapshot", `{"status":"running","snapshot":"` + testBaseImage + `","state":"started"}`},
		{"exec", `{"success":true,"exitCode":0,"stdout":"hello world\n","stderr":""}`},
		{"exec-failing", `{"success":false,"exitCode":3,"stdout":"out\n","stderr":"err\n"}`},
		{"streaming", `{"exitCode":0,"stdout":"one\nthree\n","stderr":"two\n","chunked":true}`},
		{"background", `{"listed":true,"killed":true,"exitCode":137,"stdout":"started\n"}`},
		{"background-exit", `{"exitCode":42,"stdout":"bg\n"}`},
		{"stop", `{"status":"stopped","state":"stopped"}`},
		{"start-again", `{"status":"running","state":"started","file":"kept\n"}`},
		{"destroy", `{"status":"destroyed","state":"gone"}`},
		{"start-by-image", `{"status":"running","state":"started","dockerfile":"FROM ` + testBaseImage + `\n","cpu":1,"memory":1,"logs":true}`},
		{"exec-image", `{"success":true,"exitCode":0,"stdout":` + jsonString(testrootfs.OSRelease) + `,"stderr":""}`},
		{"destroy-image", `{"status":"destroyed","state":"gone"}`},
	}, "AGENTBOX_SANDBOX_NAME="+name, "AGENTBOX_BASE_IMAGE="+testBaseImage)
	t.Run("spec", func(t *testing.T) { offSpec.report(t) })
}
