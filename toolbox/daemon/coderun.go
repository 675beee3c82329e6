package daemon

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// POST /process/code-run: a program in Python, JavaScript or TypeScript,
// run to its end by the sandbox's own interpreters (python3, node).

// codeRunRunner runs a Python program and records its matplotlib charts.
//
//go:embed coderun_runner.py
var codeRunRunner string

// Node.js 22.6 is the first release that runs TypeScript by stripping its
// types (--experimental-strip-types).
const (
	minStripTypesMajor = 22
	minStripTypesMinor = 6
)

// maxChartsBytes bounds the size of the charts file read back (base64 PNGs).
const maxChartsBytes = 64 << 20

func (s *Server) codeRunRoutes() []route {
	return []route{
		{"POST /process/code-run", s.handleCodeRun},
	}
}

func (s *Server) handleCodeRun(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.CodeRunRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Code) == "" {
		return badRequest("code is required")
	}
	if strings.IndexByte(req.Code, 0) >= 0 {
		return badRequest("code contains a NUL byte")
	}
	if req.Timeout < 0 {
		return badRequest("timeout must be >= 0 seconds, got %d", req.Timeout)
	}
	for i, a := range req.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return badRequest("argv[%d] contains a NUL byte", i)
		}
	}
	env, err := s.commandEnv(req.Envs)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.tmpDir, "run-"+randomHex(8))
	if err := s.tmpFS.mkdir(dir, 0o700, false); err != nil {
		return fmt.Errorf("creating the program's dir: %w", err)
	}
	defer s.tmpFS.removeAll(dir)
	argv, err := s.programArgv(r.Context(), req, env, dir)
	if err != nil {
		return err
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = sandbox.ShellQuote(a)
	}
	// The shell only execs the program: it resolves the interpreter in the
	// program's PATH and the one-shot machinery kills the tree and reads
	// the merged output.
	res, err := s.runTimed(r, "exec "+strings.Join(quoted, " "), s.workDir, env, req.Timeout, "code execution")
	if err != nil || res == nil {
		return err
	}
	charts, err := s.readCharts(filepath.Join(dir, "charts.jsonl"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toolbox.CodeRunResponse{
		ExitCode:  res.ExitCode,
		Result:    res.Result,
		Artifacts: &toolbox.CodeRunArtifacts{Charts: charts},
	})
	return nil
}

// programArgv writes the program into dir and returns the argv that runs
// it in its language, or a 400 naming what the sandbox lacks.
func (s *Server) programArgv(ctx context.Context, req toolbox.CodeRunRequest, env []string, dir string) ([]string, error) {
	var argv []string
	write := func(name, text string) (string, error) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return "", fmt.Errorf("writing the program: %w", err)
		}
		return p, nil
	}
	switch strings.ToLower(strings.TrimSpace(req.Language)) {
	case toolbox.LanguagePython:
		py, err := lookPathIn("python3", env)
		if err != nil {
			return nil, badRequest("cannot run python: %v; install python3 in the sandbox", err)
		}
		runner, err := write("agentbox_runner.py", codeRunRunner)
		if err != nil {
			return nil, err
		}
		prog, err := write("main.py", req.Code)
		if err != nil {
			return nil, err
		}
		argv = []string{py, "-u", runner, filepath.Join(dir, "charts.jsonl"), prog}
	case toolbox.LanguageJavaScript:
		node, err := lookPathIn("node", env)
		if err != nil {
			return nil, badRequest("cannot run javascript: %v; install Node.js in the sandbox", err)
		}
		prog, err := write("main.js", req.Code)
		if err != nil {
			return nil, err
		}
		argv = []string{node, prog}
	case toolbox.LanguageTypeScript:
		run, err := typeScriptRunner(ctx, env)
		if err != nil {
			return nil, err
		}
		prog, err := write("main.ts", req.Code)
		if err != nil {
			return nil, err
		}
		argv = append(run, prog)
	default:
		return nil, badRequest("unsupported language: %s (use %s, %s or %s)", req.Language,
			toolbox.LanguagePython, toolbox.LanguageJavaScript, toolbox.LanguageTypeScript)
	}
	return append(argv, req.Argv...), nil
}

// typeScriptRunner returns the argv prefix that runs a .ts file with what
// the sandbox has, offline: Node.js 22.6 or newer strips the types itself;
// otherwise tsx or ts-node from PATH.
func typeScriptRunner(ctx context.Context, env []string) ([]string, error) {
	node, nodeErr := lookPathIn("node", env)
	var version string
	if nodeErr == nil {
		v, err := nodeVersion(ctx, node, env)
		if err == nil && !versionLess(v, [3]int{minStripTypesMajor, minStripTypesMinor}) {
			return []string{node, "--experimental-strip-types", "--disable-warning=ExperimentalWarning"}, nil
		}
		version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
		if err != nil {
			version = "of unknown version"
		}
	}
	for _, tool := range []string{"tsx", "ts-node"} {
		if p, err := lookPathIn(tool, env); err == nil {
			return []string{p}, nil
		}
	}
	found := "no Node.js"
	if nodeErr == nil {
		found = "Node.js " + version
	}
	return nil, badRequest("cannot run typescript: the sandbox has %s; TypeScript needs Node.js %d.%d or newer (it strips the types itself) or tsx or ts-node in PATH",
		found, minStripTypesMajor, minStripTypesMinor)
}

// nodeVersion asks node for its version ("v20.20.2" → {20, 20, 2}).
func nodeVersion(ctx context.Context, node string, env []string) ([3]int, error) {
	var v [3]int
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return v, fmt.Errorf("%s --version: %w", node, err)
	}
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 3)
	for i := range v {
		if i >= len(parts) {
			break
		}
		n, err := strconv.Atoi(strings.TrimFunc(parts[i], func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			return v, fmt.Errorf("%s --version printed %q", node, out)
		}
		v[i] = n
	}
	return v, nil
}

func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// lookPathIn finds an executable named name in the PATH of env.
func lookPathIn(name string, env []string) (string, error) {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not in PATH (%s)", name, path)
}

// readCharts reads the charts file a Python run wrote (one JSON chart a
// line); a missing file means no charts.
func (s *Server) readCharts(path string) ([]toolbox.Chart, error) {
	charts := []toolbox.Chart{}
	f, err := s.tmpFS.openRead(path)
	if errors.Is(err, os.ErrNotExist) {
		return charts, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading the charts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxChartsBytes)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c toolbox.Chart
		if err := json.Unmarshal(line, &c); err != nil {
			continue // a program that wrote into the file itself
		}
		charts = append(charts, c)
	}
	return charts, nil
}
