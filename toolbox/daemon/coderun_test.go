package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// debianPath is Debian's default PATH, which a local sandbox's commands
// get: a developer's shell may have other interpreters first in its PATH.
const debianPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func (e *testEnv) codeRun(req toolbox.CodeRunRequest) toolbox.CodeRunResponse {
	e.t.Helper()
	data := e.expect(http.StatusOK, "POST", "/process/code-run", req)
	var r toolbox.CodeRunResponse
	if err := json.Unmarshal(data, &r); err != nil {
		e.t.Fatal(err)
	}
	if r.Artifacts == nil || r.Artifacts.Charts == nil {
		e.t.Fatalf("code run: no artifacts in %s", data)
	}
	return r
}

func TestCodeRunPython(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newEnv(t, true)
	r := e.codeRun(toolbox.CodeRunRequest{Code: "print(1+1)", Language: "python"})
	if r.ExitCode != 0 || r.Result != "2\n" || len(r.Artifacts.Charts) != 0 {
		t.Errorf("print(1+1): %+v", r)
	}
	// argv and envs reach the program; stderr is merged; SystemExit is
	// the exit code.
	r = e.codeRun(toolbox.CodeRunRequest{
		Code:     "import sys, os\nprint(sys.argv[1:], os.environ.get('Z'))\nsys.stderr.write('E\\n')\nraise SystemExit(4)",
		Language: "python", Argv: []string{"a", "b c"}, Envs: map[string]string{"Z": "z"},
	})
	if r.ExitCode != 4 || r.Result != "['a', 'b c'] z\nE\n" {
		t.Errorf("argv/env/exit: %+v", r)
	}
	// An exception's traceback names the program's lines, not the runner's.
	r = e.codeRun(toolbox.CodeRunRequest{Code: "x = 1\nraise ValueError('boom')", Language: "python"})
	if r.ExitCode != 1 || !strings.Contains(r.Result, "line 2") || !strings.Contains(r.Result, "ValueError: boom") ||
		strings.Contains(r.Result, "runpy") || strings.Contains(r.Result, "agentbox_runner") {
		t.Errorf("exception: %+v", r)
	}
	// The program runs in the work dir; input() sees end of file.
	r = e.codeRun(toolbox.CodeRunRequest{Code: "import os\nprint(os.getcwd())\ntry:\n    input()\nexcept EOFError:\n    print('eof')", Language: "python"})
	if r.ExitCode != 0 || r.Result != e.work+"\neof\n" {
		t.Errorf("cwd/stdin: %+v", r)
	}
}

// TestCodeRunCharts checks the chart plumbing with a stand-in matplotlib
// (the host need not have it): plt.show() records each figure, and a
// figure the runner cannot read still yields a chart.
func TestCodeRunCharts(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "matplotlib"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"matplotlib/__init__.py": "",
		"matplotlib/pyplot.py": `_figs = {}
class _Fig:
    def get_axes(self): raise RuntimeError("stand-in")
    def savefig(self, buf, format): buf.write(b"PNG!")
def figure(num=None):
    return _figs.setdefault(num or len(_figs) + 1, _Fig())
def get_fignums(): return sorted(_figs)
def close(which): _figs.clear()
def show(): print("the real show ran")
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, true, func(o *Options) { o.Env = append(o.Env, "PYTHONPATH="+fake) })
	r := e.codeRun(toolbox.CodeRunRequest{Code: "import matplotlib.pyplot as plt\nplt.figure()\nplt.figure()\nplt.show()\nprint('shown')", Language: "python"})
	if r.ExitCode != 0 || r.Result != "shown\n" || len(r.Artifacts.Charts) != 2 {
		t.Fatalf("charts: %+v", r)
	}
	for _, c := range r.Artifacts.Charts {
		if c.Type != "unknown" || c.PNG != "UE5HIQ==" {
			t.Errorf("chart %+v, want type unknown with the figure's PNG", c)
		}
	}
}

// TestCodeRunMatplotlib runs a real matplotlib line chart where the host
// has matplotlib (optional: Debian package python3-matplotlib).
func TestCodeRunMatplotlib(t *testing.T) {
	// Debian's python3 and its matplotlib, as a sandbox sees them: the
	// PATH a developer's shell has may lead to another python3 first.
	py := exec.Command("/usr/bin/env", "python3", "-c", "import matplotlib") // env looks python3 up in debianPath
	py.Env = []string{"PATH=" + debianPath}
	if err := py.Run(); err != nil {
		testenv.Skip(t, "python3 with matplotlib is not installed (Debian package python3-matplotlib): "+err.Error())
	}
	e := newEnv(t, true, func(o *Options) { o.Env = []string{"PATH=" + debianPath, "HOME=" + o.WorkDir, "LANG=C"} })
	r := e.codeRun(toolbox.CodeRunRequest{Language: "python",
		Code: "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], label='up')\nplt.title('T')\nplt.show()"})
	if r.ExitCode != 0 || len(r.Artifacts.Charts) != 1 {
		t.Fatalf("matplotlib: %+v", r)
	}
	c := r.Artifacts.Charts[0]
	if c.Type != "line" || c.Title != "T" || !strings.HasPrefix(c.PNG, "iVBORw0KGgo") || len(c.XTicks) == 0 ||
		len(c.Elements) != 1 || c.Elements[0].Label != "up" || len(c.Elements[0].Points) != 3 {
		t.Errorf("chart: %+v", c)
	}
}

func TestCodeRunJavaScript(t *testing.T) {
	testenv.NeedTool(t, "node", "nodejs")
	e := newEnv(t, true)
	r := e.codeRun(toolbox.CodeRunRequest{Language: "javascript", Argv: []string{"Daytona"}, Envs: map[string]string{"FOO": "BAR"},
		Code: "console.log(`Hello, ${process.argv[2]}!`); console.error(`FOO: ${process.env.FOO}`); process.exit(3)"})
	if r.ExitCode != 3 || r.Result != "Hello, Daytona!\nFOO: BAR\n" {
		t.Errorf("javascript: %+v", r)
	}
}

// TestCodeRunTypeScript runs TypeScript where the sandbox can (Node.js
// 22.6 or newer, tsx or ts-node), and otherwise checks the 400 that says
// what is missing.
func TestCodeRunTypeScript(t *testing.T) {
	node := testenv.NeedTool(t, "node", "nodejs")
	req := toolbox.CodeRunRequest{Language: "typescript", Code: "const x: number = 5; console.log(x)"}
	// Debian's PATH, where only node is: it runs TypeScript itself from
	// Node.js 22.6 on; before, the answer says what is missing.
	t.Run("node", func(t *testing.T) {
		env := []string{"PATH=" + debianPath}
		e := newEnv(t, true, func(o *Options) { o.Env = append(env, "HOME="+o.WorkDir) })
		if _, err := typeScriptRunner(t.Context(), env); err == nil {
			if r := e.codeRun(req); r.ExitCode != 0 || r.Result != "5\n" {
				t.Errorf("typescript: %+v", r)
			}
			return
		}
		out, _ := exec.Command(node, "--version").Output()
		er := e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/code-run", req)
		want := "the sandbox has Node.js " + strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
		if !strings.Contains(er.Message, want) || !strings.Contains(er.Message, "22.6 or newer") || !strings.Contains(er.Message, "tsx") {
			t.Errorf("message %q, want it to say %q and what is needed", er.Message, want)
		}
	})
	// With tsx in PATH (the npm project of internal/sdktest pins one;
	// scripts/test.sh installs it), any Node.js runs it.
	t.Run("tsx", func(t *testing.T) {
		bin, err := filepath.Abs("../../internal/sdktest/testdata/node/node_modules/.bin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(bin, "tsx")); err != nil {
			testenv.Skip(t, "tsx is not installed: run npm ci --ignore-scripts --prefix internal/sdktest/testdata/node")
		}
		e := newEnv(t, true, func(o *Options) { o.Env = []string{"PATH=" + bin + ":" + debianPath, "HOME=" + o.WorkDir} })
		if r := e.codeRun(req); r.ExitCode != 0 || r.Result != "5\n" {
			t.Errorf("typescript through tsx: %+v", r)
		}
	})
}

func TestCodeRunTimeout(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newEnv(t, true)
	e.expectError(http.StatusRequestTimeout, codeRequestTimeout, "POST", "/process/code-run",
		toolbox.CodeRunRequest{Language: "python", Code: "import time\ntime.sleep(30)", Timeout: 1})
}

func TestCodeRunBadInput(t *testing.T) {
	e := newErrEnv(t)
	for name, req := range map[string]any{
		"language": toolbox.CodeRunRequest{Code: "print(1)", Language: "cobol"},
		"empty":    toolbox.CodeRunRequest{Code: " \n", Language: "python"},
		"timeout":  toolbox.CodeRunRequest{Code: "print(1)", Language: "python", Timeout: -1},
		"env":      toolbox.CodeRunRequest{Code: "print(1)", Language: "python", Envs: map[string]string{"1X": "v"}},
		"argv":     toolbox.CodeRunRequest{Code: "print(1)", Language: "python", Argv: []string{"a\x00"}},
	} {
		t.Run(name, func(t *testing.T) {
			er := e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/code-run", req)
			if name == "language" && er.Message != "bad request: unsupported language: cobol (use python, javascript or typescript)" {
				t.Errorf("message %q", er.Message)
			}
		})
	}
	e.expectError(http.StatusBadRequest, codeInvalidRequestBody, "POST", "/process/code-run", []byte("{"))
	// A missing interpreter is named.
	noPath := newErrEnv(t, func(o *Options) { o.Env = []string{"PATH=/nonexistent"} })
	er := noPath.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/code-run", toolbox.CodeRunRequest{Code: "print(1)", Language: "python"})
	if !strings.Contains(er.Message, "python3 is not in PATH") {
		t.Errorf("missing python3: %q", er.Message)
	}
}
