package sdktest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/local"
)

func TestMain(m *testing.M) {
	local.Init() // agentbox serve's sandboxes re-execute the test binary as their init
	goleak.VerifyTestMain(m)
}

// A feature is one module of testdata/node and the steps it reports.
type feature struct {
	name   string
	module string
	// setup prepares the sandbox and returns the module's args (nil: none).
	setup func(t *testing.T, s *sandbox) any
	steps []step
}

// A step checks what the module reported for the step of that name
// (value: the step's JSON value) and the sandbox's disk afterwards.
type step struct {
	name  string
	check func(t *testing.T, s *sandbox, value json.RawMessage)
}

// TestTypeScriptSDK runs every feature with each SDK release, every
// feature in a sandbox of its own, and checks every step:
// TestTypeScriptSDK/<release>/<feature>/<step>. One node process per
// release runs all the features (loading the SDK takes most of its time).
func TestTypeScriptSDK(t *testing.T) {
	p := findNode(t)
	for _, alias := range aliases {
		version := p.versions[alias]
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			cp := newControlPlane(t)
			fs := features()
			sandboxes := make([]*sandbox, len(fs))
			runs := make([]featureRun, len(fs))
			for i, f := range fs {
				s := cp.addSandbox(t, "sdktest-"+f.name)
				runs[i] = featureRun{Name: f.name, Module: f.module, SandboxID: s.id, Work: s.work}
				if f.setup != nil {
					runs[i].Args = f.setup(t, s)
				}
				sandboxes[i] = s
			}
			rep := cp.run(t, p, alias, runs)
			if rep.SDK != version {
				t.Errorf("the driver ran SDK %s, want %s", rep.SDK, version)
			}
			for i, f := range fs {
				t.Run(f.name, func(t *testing.T) {
					sandboxes[i].logFailed(t)
					sandboxes[i].offSpec.report(t)
					checkSteps(t, sandboxes[i], rep.Features[f.name], f.steps)
				})
			}
		})
	}
}

// checkSteps runs one subtest per expected step.
func checkSteps(t *testing.T, s *sandbox, results []stepResult, steps []step) {
	t.Helper()
	got := make(map[string]stepResult, len(results))
	for _, r := range results {
		got[r.Name] = r
	}
	if r, ok := got["get-sandbox"]; ok {
		t.Fatalf("daytona.get(%q): %s", s.id, r.failure())
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r, ok := got[st.name]
			if !ok {
				t.Fatalf("the driver reported no step %q", st.name)
			}
			if !r.OK {
				t.Fatal(r.failure())
			}
			st.check(t, s, r.Value)
		})
	}
}

func features() []feature {
	return []feature{
		{name: "execute", module: "execute.mjs", setup: mkdirSub, steps: executeSteps},
		{name: "files", module: "files.mjs", setup: writeFileFixtures, steps: fileSteps},
		{name: "git", module: "git.mjs", setup: func(t *testing.T, s *sandbox) any {
			repo := serveGitRepo(t, s.plane)
			s.gitHeads = repo.heads
			return map[string]string{"url": repo.url}
		}, steps: gitSteps},
		{name: "code-run", module: "coderun.mjs", steps: codeRunSteps},
		{name: "interpreter", module: "interpreter.mjs", steps: interpreterSteps},
		{name: "pty", module: "pty.mjs", steps: ptySteps},
		{name: "sessions", module: "sessions.mjs", steps: sessionSteps},
	}
}

// decode decodes a step's value, failing the test when it does not fit.
func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("step value %s: %v", raw, err)
	}
	return v
}

// equal decodes a step's value into a T and compares it with want.
func equal[T any](want T) func(t *testing.T, s *sandbox, raw json.RawMessage) {
	return func(t *testing.T, s *sandbox, raw json.RawMessage) {
		t.Helper()
		if got := decode[T](t, raw); !reflect.DeepEqual(got, want) {
			t.Errorf("got %s\nwant %s", jsonString(got), jsonString(want))
		}
	}
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// fileIs checks that the file at rel (under the work dir) holds content.
func fileIs(t *testing.T, s *sandbox, rel string, content []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(s.work, rel))
	if err != nil {
		t.Errorf("on disk: %v", err)
		return
	}
	if !bytes.Equal(got, content) {
		t.Errorf("on disk, %s holds %q, want %q", rel, got, content)
	}
}

func noValue(t *testing.T, s *sandbox, raw json.RawMessage) {}

func mkdirSub(t *testing.T, s *sandbox) any {
	if err := os.Mkdir(filepath.Join(s.work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return nil
}

type execResult struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

var executeSteps = []step{
	{"work-dir", func(t *testing.T, s *sandbox, raw json.RawMessage) { equal(s.work)(t, s, raw) }},
	{"home-dir", func(t *testing.T, s *sandbox, raw json.RawMessage) { equal(s.work)(t, s, raw) }},
	{"execute", equal(execResult{ExitCode: 3, Result: "out\nerr\n"})},
	{"execute-cwd-env", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		equal(execResult{Result: filepath.Join(s.work, "sub") + " hello\n"})(t, s, raw)
	}},
}

// The files the files feature starts with, under {work}/files.
var fileFixtures = map[string][]byte{
	"a.txt":    []byte("alpha\nneedle one\n"),
	"b.txt":    []byte("needle two\nbeta\n"),
	"sub/c.md": []byte("gamma needle\n"),
	"d.bin":    binaryBytes(),
	"e.txt":    []byte("move me\n"),
	"f.txt":    []byte("delete me\n"),
}

// binaryBytes is every byte value: what no text conversion leaves intact.
func binaryBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func writeFileFixtures(t *testing.T, s *sandbox) any {
	for name, content := range fileFixtures {
		path := filepath.Join(s.work, "files", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return nil
}

type fileEntry struct {
	Name  string `json:"name"`
	IsDir bool   `json:"isDir"`
	Size  int    `json:"size"`
}

type match struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

type downloaded struct {
	Source string  `json:"source"`
	Result *string `json:"result"` // base64
	Error  *string `json:"error"`
}

func filesPath(s *sandbox, name string) string { return filepath.Join(s.work, "files", name) }

var fileSteps = []step{
	{"upload", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		fileIs(t, s, "files/up.txt", []byte("uploaded by the sdk\n"))
	}},
	{"download", equal(base64.StdEncoding.EncodeToString(fileFixtures["a.txt"]))},
	{"list", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		got := decode[[]fileEntry](t, raw)
		for _, want := range []fileEntry{
			{Name: "a.txt", Size: len(fileFixtures["a.txt"])},
			{Name: "d.bin", Size: 256},
			{Name: "sub", IsDir: true},
		} {
			i := slices.IndexFunc(got, func(e fileEntry) bool { return e.Name == want.Name })
			if i < 0 || got[i].IsDir != want.IsDir || (!want.IsDir && got[i].Size != want.Size) {
				t.Errorf("listing %s lacks %s: %s", filesPath(s, ""), jsonString(want), raw)
			}
		}
	}},
	{"details", equal(fileEntry{Name: "a.txt", Size: len(fileFixtures["a.txt"])})},
	{"find", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		got := decode[[]match](t, raw)
		want := []match{
			{File: filesPath(s, "a.txt"), Line: 2, Content: "needle one"},
			{File: filesPath(s, "b.txt"), Line: 1, Content: "needle two"},
			{File: filesPath(s, "sub/c.md"), Line: 1, Content: "gamma needle"},
		}
		sortMatches := func(m []match) {
			slices.SortFunc(m, func(a, b match) int { return bytes.Compare([]byte(a.File), []byte(b.File)) })
		}
		sortMatches(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %s\nwant %s", jsonString(got), jsonString(want))
		}
	}},
	{"search", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		equal([]string{filesPath(s, "sub/c.md")})(t, s, raw)
	}},
	{"replace", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		type result struct {
			File    string `json:"file"`
			Success bool   `json:"success"`
			Error   string `json:"error"`
		}
		equal([]result{{File: filesPath(s, "a.txt"), Success: true}, {File: filesPath(s, "b.txt"), Success: true}})(t, s, raw)
		fileIs(t, s, "files/a.txt", []byte("alpha\npin one\n"))
		fileIs(t, s, "files/b.txt", []byte("pin two\nbeta\n"))
	}},
	{"permissions", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		type perms struct {
			Mode        string `json:"mode"`
			Permissions string `json:"permissions"`
		}
		equal(perms{Mode: "-rw-------", Permissions: "0600"})(t, s, raw)
		fi, err := os.Stat(filesPath(s, "b.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("on disk, b.txt has mode %v, want 0600", fi.Mode().Perm())
		}
	}},
	{"bulk-upload", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		fileIs(t, s, "files/bulk/one.txt", []byte("first\n"))
		fileIs(t, s, "files/bulk/two.bin", []byte{0, 1, 2, 255, 10, 13})
	}},
	{"bulk-download", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		got := decode[[]downloaded](t, raw)
		b64 := func(b []byte) *string { e := base64.StdEncoding.EncodeToString(b); return &e }
		want := []downloaded{
			{Source: filesPath(s, "sub/c.md"), Result: b64(fileFixtures["sub/c.md"])},
			{Source: filesPath(s, "d.bin"), Result: b64(fileFixtures["d.bin"])},
			{Source: filesPath(s, "missing.txt")},
		}
		if len(got) != len(want) {
			t.Fatalf("got %d results, want %d: %s", len(got), len(want), raw)
		}
		for i := range want {
			if i == 2 {
				if got[i].Source != want[i].Source || got[i].Error == nil || *got[i].Error == "" {
					t.Errorf("a missing file: got %s, want its source and an error", jsonString(got[i]))
				}
				continue
			}
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("result %d: got %s\nwant %s", i, jsonString(got[i]), jsonString(want[i]))
			}
		}
	}},
	{"upload-stream", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		fileIs(t, s, "files/streamed.txt", []byte("streamed upload\n"))
	}},
	{"download-stream", equal(base64.StdEncoding.EncodeToString(fileFixtures["d.bin"]))},
	{"create-folder", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		fi, err := os.Stat(filesPath(s, "made"))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Errorf("on disk, made is %v (%v), want a folder with mode 0750", fi, err)
		}
	}},
	{"move", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		fileIs(t, s, "files/e-moved.txt", fileFixtures["e.txt"])
		if _, err := os.Stat(filesPath(s, "e.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("on disk, e.txt is still there after the move (%v)", err)
		}
	}},
	{"delete", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if _, err := os.Stat(filesPath(s, "f.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("on disk, f.txt is still there after its deletion (%v)", err)
		}
	}},
	{"bulk-download-fallback", checkFallbackParts},
}

// fallbackPart is a part of a bulk-download answer as the SDK's fallback
// multipart parser reads it.
type fallbackPart struct {
	Name     string `json:"name"`
	Filename string `json:"filename"`
	Data     []byte `json:"data"`
}

func checkFallbackParts(t *testing.T, s *sandbox, raw json.RawMessage) {
	got := decode[[]fallbackPart](t, raw)
	if len(got) != 2 {
		t.Fatalf("got %d parts, want 2 (a file and an error): %s", len(got), raw)
	}
	if want := (fallbackPart{Name: "file", Filename: filesPath(s, "sub/c.md"), Data: fileFixtures["sub/c.md"]}); !reflect.DeepEqual(got[0], want) {
		t.Errorf("the file part reads as %s, want %s", jsonString(got[0]), jsonString(want))
	}
	var errBody struct{ StatusCode int }
	if got[1].Name != "error" || got[1].Filename != filesPath(s, "missing.txt") || json.Unmarshal(got[1].Data, &errBody) != nil || errBody.StatusCode != 404 {
		t.Errorf("the error part reads as name %q, filename %q, body %q; want error, %s and a 404 ErrorResponse", got[1].Name, got[1].Filename, got[1].Data, filesPath(s, "missing.txt"))
	}
}

var gitSteps = []step{
	{"clone", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		fileIs(t, s, "repo/README.md", []byte("hello from main\n"))
		if got, want := hostGit(t, filepath.Join(s.work, "repo"), "rev-parse", "HEAD"), s.gitHeads["main"]; got != want {
			t.Errorf("the clone's HEAD is %s, want main's %s", got, want)
		}
	}},
	{"clone-branch", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		fileIs(t, s, "repo-feature/feature.txt", []byte("on the feature branch\n"))
		if got, want := hostGit(t, filepath.Join(s.work, "repo-feature"), "rev-parse", "HEAD"), s.gitHeads["feature"]; got != want {
			t.Errorf("the clone's HEAD is %s, want feature's %s", got, want)
		}
	}},
	{"status", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		type status struct {
			CurrentBranch string            `json:"currentBranch"`
			FileStatus    []json.RawMessage `json:"fileStatus"`
		}
		equal(status{CurrentBranch: "main", FileStatus: []json.RawMessage{}})(t, s, raw)
	}},
	{"branches", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[[]string](t, raw); !slices.Contains(got, "feature") {
			t.Errorf("branches of the feature clone: %v, want feature among them", got)
		}
	}},
}

var codeRunSteps = []step{
	{"print", equal(execResult{Result: "42\n"})},
	{"argv-env", equal(execResult{Result: "['a', 'b'] hi\n"})},
	{"exit-code", equal(execResult{ExitCode: 3, Result: "bye\n"})},
}

var interpreterSteps = []step{
	{"default-context", equal(map[string]any{"stdout": "hello\n", "stderr": "", "error": nil})},
	{"create-context", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[struct{ HasID bool }](t, raw); !got.HasID {
			t.Errorf("the context has no id: %s", raw)
		}
	}},
	{"keep-variable", equal(map[string]any{"first": "", "second": "42\n", "error": nil})},
	{"error", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[struct{ Name string }](t, raw); got.Name != "ZeroDivisionError" {
			t.Errorf("1/0 raised %s, want ZeroDivisionError", raw)
		}
	}},
	{"stderr", equal(map[string]any{"stdout": "", "stderr": "oops\n"})},
	{"list-contexts", equal(true)},
	{"delete-context", equal(false)},
}

const ptyID = "sdk-pty"

var ptySteps = []step{
	{"create", equal(ptyID)},
	{"size", equal("24x80")},
	{"env-cwd", func(t *testing.T, s *sandbox, raw json.RawMessage) { equal("hello:"+s.work)(t, s, raw) }},
	{"resize", equal(map[string]int{"cols": 100, "rows": 30})},
	{"size-after-resize", equal("30x100")},
	{"info", equal(map[string]any{"id": ptyID, "active": true, "cols": 100.0, "rows": 30.0})},
	{"list", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[[]string](t, raw); !slices.Contains(got, ptyID) {
			t.Errorf("PTY sessions %v lack %s", got, ptyID)
		}
	}},
	{"reconnect", equal("hello")},
	{"exit-code", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[struct{ ExitCode *int }](t, raw); got.ExitCode == nil || *got.ExitCode != 7 {
			t.Errorf("exit 7 ended the PTY with %s", raw)
		}
	}},
}

const sessionID = "sdk-session"

var sessionSteps = []step{
	{"create", noValue},
	{"sync-exec", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		got := decode[map[string]any](t, raw)
		if got["exitCode"] != 0.0 || got["stdout"] != "hello\n" || got["stderr"] != "e\n" {
			t.Errorf("got %s, want exit code 0, stdout hello, stderr e", raw)
		}
	}},
	{"async-exec", equal(map[string]bool{"hasId": true})},
	{"stream-logs", equal(map[string]string{"stdout": "out1\nout2\nout3\n", "stderr": "err1\nerr2\nerr3\n"})},
	{"command", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[struct{ ExitCode *int }](t, raw); got.ExitCode == nil || *got.ExitCode != 4 {
			t.Errorf("the command's exit code: %s, want 4", raw)
		}
	}},
	{"get-session", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		exit := 4
		equal(struct {
			SessionID string `json:"sessionId"`
			ExitCode  *int   `json:"exitCode"`
		}{sessionID, &exit})(t, s, raw)
	}},
	{"logs", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		got := decode[map[string]any](t, raw)
		if got["stdout"] != "out1\nout2\nout3\n" || got["stderr"] != "err1\nerr2\nerr3\n" {
			t.Errorf("logs: %s", raw)
		}
	}},
	// Input is echoed into the command's output, as Daytona does unless
	// the exec sets suppressInputEcho.
	{"input", equal(map[string]any{"exitCode": 0.0, "stdout": "typed\ngot:typed\n"})},
	{"list", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[[]string](t, raw); !slices.Contains(got, sessionID) {
			t.Errorf("sessions %v lack %s", got, sessionID)
		}
	}},
	{"delete", func(t *testing.T, s *sandbox, raw json.RawMessage) {
		if got := decode[[]string](t, raw); slices.Contains(got, sessionID) {
			t.Errorf("sessions %v still list %s after its deletion", got, sessionID)
		}
	}},
}
