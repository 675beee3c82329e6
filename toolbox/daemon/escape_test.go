package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// escapeMarker is the content of the file outside the root: no answer may
// ever hold it.
const escapeMarker = "MARKER-OUTSIDE-THE-ROOT-7f3a"

// escapeFixture is a server confined to a root, while the test process
// (the server's process) holds a descriptor of a folder outside it, and
// has its cwd there, as a sandbox's init held host folders in issue 24.
type escapeFixture struct {
	e       *testEnv
	root    string // the server's root, on the host
	outside string // the folder outside it, holding "secret"
	before  string // snapshot of outside
}

// escapeForms are the links a sandbox plants, each named by its form;
// through each, "<form>/secret" is outside/secret when resolved without
// containment. fd is the test's descriptor of outside.
func escapeForms(outside string, fd int) map[string]string {
	pid := strconv.Itoa(os.Getpid())
	n := strconv.Itoa(fd)
	base := filepath.Base(outside)
	return map[string]string{
		"selffd-dotdot":   "/proc/self/fd/" + n + "/../" + base,
		"selffd":          "/proc/self/fd/" + n,
		"threadself-fd":   "/proc/thread-self/fd/" + n,
		"pid-fd":          "/proc/" + pid + "/fd/" + n,
		"pid-cwd":         "/proc/" + pid + "/cwd",
		"pid-root":        "/proc/" + pid + "/root" + outside,
		"selfroot-dotdot": "/proc/self/root/.." + outside,
		"abs-slash":       "/" + outside, // an absolute link: the host's path
		"dotdot-chain":    strings.Repeat("../", 20) + strings.TrimPrefix(outside, "/"),
	}
}

func newEscapeFixture(t *testing.T) (*escapeFixture, map[string]string) {
	top := t.TempDir()
	root := filepath.Join(top, "root")
	outside := filepath.Join(top, "outside")
	for _, d := range []string{filepath.Join(root, "work", "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte(escapeMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(outside, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "dir", "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeEscapeRepo(t, outside, "dir/file")
	if err := os.WriteFile(filepath.Join(root, "work", "inside.txt"), []byte("inside "+"needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inRepo := filepath.Join(root, "work", "gitrepo")
	if err := os.MkdirAll(inRepo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inRepo, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeEscapeRepo(t, inRepo, "a.txt")
	od, err := os.Open(outside)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { od.Close() })
	t.Chdir(outside) // /proc/<pid>/cwd is outside
	forms := escapeForms(outside, int(od.Fd()))
	for name, target := range forms {
		if err := os.Symlink(target, filepath.Join(root, "work", name)); err != nil {
			t.Fatal(err)
		}
	}
	// Without containment every form reaches the marker.
	for name := range forms {
		if b, err := os.ReadFile(filepath.Join(root, "work", name, "secret")); err != nil || !bytes.Contains(b, []byte(escapeMarker)) {
			t.Fatalf("form %s does not reach the marker on the host (%v): the probe would prove nothing", name, err)
		}
	}
	e := newEnv(t, false, func(o *Options) { confine(o, root) })
	f := &escapeFixture{e: e, root: root, outside: outside}
	f.before = f.snapshot(t)
	return f, forms
}

// snapshot describes everything under outside: names, modes, contents.
func (f *escapeFixture) snapshot(t *testing.T) string {
	var b strings.Builder
	err := filepath.Walk(f.outside, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", strings.TrimPrefix(p, f.outside), fi.Mode())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// escapeRoute drives one route with a path: rel is relative to the work
// dir ("<form>/secret"-style, or a control path inside the root). It
// returns the answer's status and body; ok tells whether the answer is
// the route's success for the control.
type escapeRoute struct {
	name string
	// file: whether the probe is given "<form>/secret" (a file) rather
	// than "<form>" (a folder); control is the in-root path for it.
	file    bool
	control string
	probe   func(t *testing.T, e *testEnv, rel string) (int, []byte)
	// ok checks a control answer.
	ok func(status int, body []byte) bool
	// mustFail: no probe through a form may succeed (status < 300). It is
	// for routes that need a repository there: inside the root no form
	// leads to one, so a success is one opened outside it.
	mustFail bool
}

func jsonOK(status int, body []byte) bool { return status == http.StatusOK }

func escapeRoutes() []escapeRoute {
	get := func(route, param string) func(t *testing.T, e *testEnv, rel string) (int, []byte) {
		return func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("GET", route+"?"+param+"="+url.QueryEscape(rel), nil)
			return resp.StatusCode, body
		}
	}
	mp := func(parts ...string) (*bytes.Buffer, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for i := 0; i+1 < len(parts); i += 2 {
			if strings.HasSuffix(parts[i], ".path") {
				_ = mw.WriteField(parts[i], parts[i+1])
			} else if w, err := mw.CreateFormFile(parts[i], "blob"); err == nil {
				_, _ = w.Write([]byte(parts[i+1]))
			}
		}
		_ = mw.Close()
		return &b, mw.FormDataContentType()
	}
	return []escapeRoute{
		{name: "download", file: true, control: "inside.txt", probe: get("/files/download", "path"),
			ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("needle")) }},
		{name: "info", file: true, control: "inside.txt", probe: get("/files/info", "path"), ok: jsonOK},
		{name: "list", control: ".", probe: listProbe(""),
			ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("inside.txt")) }},
		{name: "list-depth", control: ".", probe: listProbe("depth=3&"), ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("inside.txt")) }},
		{name: "find", control: ".", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("GET", "/files/find?pattern=MARKER&path="+url.QueryEscape(rel), nil)
			if rel == "." {
				resp, body = e.do("GET", "/files/find?pattern=needle&path=.", nil)
			}
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("inside.txt")) }},
		{name: "search", control: ".", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			pat := "secret"
			if rel == "." {
				pat = "inside*"
			}
			resp, body := e.do("GET", "/files/search?pattern="+pat+"&path="+url.QueryEscape(rel), nil)
			if bytes.Contains(body, []byte("secret")) {
				body = append(body, escapeMarker...) // a found name is an escape too
			}
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("inside.txt")) }},
		{name: "replace", file: true, control: "inside.txt", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/files/replace", toolbox.ReplaceRequest{Files: []string{rel}, Pattern: "MARKER", NewValue: "CHANGED"})
			if rel == "inside.txt" {
				resp, body = e.do("POST", "/files/replace", toolbox.ReplaceRequest{Files: []string{rel}, Pattern: "needle", NewValue: "pin"})
			}
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte(`"success":true`)) }},
		{name: "upload-v2", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/files/upload-v2?path="+url.QueryEscape(rel+"/new-v2"), []byte("x"))
			return resp.StatusCode, body
		}, ok: jsonOK},
		{name: "upload-v1", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			body, ctype := mp("file", "x")
			resp, out := e.do("POST", "/files/upload?path="+url.QueryEscape(rel+"/new-v1"), body, "Content-Type", ctype)
			return resp.StatusCode, out
		}, ok: jsonOK},
		{name: "upload-overwrite", file: true, control: "inside.txt", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/files/upload-v2?path="+url.QueryEscape(rel), []byte("overwritten"))
			return resp.StatusCode, body
		}, ok: jsonOK},
		{name: "bulk-upload", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			body, ctype := mp("files[0].path", rel+"/new-bulk", "files[0].file", "x")
			resp, out := e.do("POST", "/files/bulk-upload", body, "Content-Type", ctype)
			return resp.StatusCode, out
		}, ok: jsonOK},
		{name: "bulk-download", file: true, control: "inside.txt", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/files/bulk-download", toolbox.FilesDownloadRequest{Paths: []string{rel}})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("needle")) }},
		{name: "folder", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/files/folder?mode=0700&path="+url.QueryEscape(rel+"/newdir/deeper"), nil)
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 201 }},
		{name: "move-from", file: true, control: "inside.txt", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			dst := "moved-" + strings.ReplaceAll(rel, "/", "-")
			resp, body := e.do("POST", "/files/move?source="+url.QueryEscape(rel)+"&destination="+url.QueryEscape(dst), nil)
			if resp.StatusCode == 200 && rel != "inside.txt" {
				if b, err := os.ReadFile(filepath.Join(e.srvRoot(), "work", dst)); err == nil {
					body = append(body, b...) // what was moved in shows
				}
			}
			return resp.StatusCode, body
		}, ok: jsonOKEmpty},
		{name: "move-to", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			src := "tomove-" + strings.ReplaceAll(rel, "/", "-")
			if err := os.WriteFile(filepath.Join(e.srvRoot(), "work", src), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			resp, body := e.do("POST", "/files/move?source="+url.QueryEscape(src)+"&destination="+url.QueryEscape(rel+"/moved-in"), nil)
			return resp.StatusCode, body
		}, ok: jsonOKEmpty},
		{name: "delete", file: true, control: "inside.txt", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("DELETE", "/files?path="+url.QueryEscape(rel), nil)
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 204 }},
		{name: "delete-recursive", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			if rel == "sub" {
				_ = os.MkdirAll(filepath.Join(e.srvRoot(), "work", "sub", "x"), 0o755)
			} else {
				rel += "/dir"
			}
			resp, body := e.do("DELETE", "/files?recursive=true&path="+url.QueryEscape(rel), nil)
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 204 }},
		{name: "permissions", file: true, control: "inside.txt", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/files/permissions?mode=0600&owner=65534&path="+url.QueryEscape(rel), nil)
			return resp.StatusCode, body
		}, ok: jsonOKEmpty},
		{name: "execute-cwd", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/process/execute", toolbox.ExecuteRequest{Command: "pwd; cat secret; ls; touch made-by-command", Cwd: rel})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("work/sub\\n")) }},
		{name: "pty-cwd", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			id := "p" + strconv.Itoa(len(rel)) + randomHex(4)
			resp, body := e.do("POST", "/process/pty", toolbox.PtyCreateRequest{ID: id, Cwd: rel, Command: "cat secret; touch made-by-pty"})
			if resp.StatusCode < 300 {
				waitPtyExit(t, e, id)
				e.do("DELETE", "/process/pty/"+id, nil)
			}
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s < 300 }},
		{name: "interpreter-cwd", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/process/interpreter/context", toolbox.CreateContextRequest{Cwd: rel, Language: "python"})
			var ic toolbox.InterpreterContext
			if resp.StatusCode == 200 && json.Unmarshal(body, &ic) == nil {
				r := runCode(t, interpClient(t, e), ic.ID, "import os\nprint(open('secret').read() if os.path.exists('secret') else 'no secret here')")
				body = append(body, r.Stdout...)
				e.do("DELETE", "/process/interpreter/context/"+ic.ID, nil)
			}
			return resp.StatusCode, body
		}, ok: jsonOK},
		{name: "git-status", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("GET", "/git/status"+q(rel), nil)
			if bytes.Contains(body, []byte("secret")) {
				body = append(body, escapeMarker...)
			}
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 404 && bytes.Contains(b, []byte("GIT_REPO_NOT_FOUND")) }},
		{name: "git-init", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/git/init", toolbox.GitInitRequest{Path: rel + "/repo"})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s < 300 }},
		{name: "git-clone-into", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/git/clone", toolbox.GitCloneRequest{URL: "gitrepo", Path: rel + "/clone-" + randomHex(4) + "/deeper"})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 }},
		{name: "git-clone-from", control: "gitrepo", mustFail: true, probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/git/clone", toolbox.GitCloneRequest{URL: rel, Path: "clones/" + randomHex(4)})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 }},
		gitRoute("git-add", "POST", "/git/add", func(rel string) any {
			f := "secret"
			if rel == "gitrepo" {
				f = "a.txt"
			}
			return toolbox.GitAddRequest{Path: rel, Files: []string{f}}
		}),
		gitRoute("git-commit", "POST", "/git/commit", func(rel string) any {
			return toolbox.GitCommitRequest{Path: rel, Message: "m", Author: "a", Email: "a@example.com", AllowEmpty: true}
		}),
		gitRoute("git-branches", "GET", "/git/branches", nil),
		gitRoute("git-branch-create", "POST", "/git/branches", func(rel string) any {
			return toolbox.GitBranchRequest{Path: rel, Name: "nb-" + randomHex(4)}
		}),
		gitRoute("git-branch-delete", "DELETE", "/git/branches", func(rel string) any {
			return toolbox.GitDeleteBranchRequest{Path: rel, Name: "pushme"}
		}),
		gitRoute("git-checkout", "POST", "/git/checkout", func(rel string) any {
			return toolbox.GitCheckoutRequest{Path: rel, Branch: "master"}
		}),
		gitRoute("git-history", "GET", "/git/history", nil),
		gitRoute("git-reset", "POST", "/git/reset", func(rel string) any {
			return toolbox.GitResetRequest{Path: rel, Mode: "hard"}
		}),
		gitRoute("git-restore", "POST", "/git/restore", func(rel string) any {
			f := "dir/file"
			if rel == "gitrepo" {
				f = "a.txt"
			}
			return toolbox.GitRestoreRequest{Path: rel, Files: []string{f}, Worktree: true}
		}),
		gitRoute("git-remotes", "GET", "/git/remotes", nil),
		gitRoute("git-remote-add", "POST", "/git/remotes", func(rel string) any {
			return toolbox.GitAddRemoteRequest{Path: rel, Name: "r", URL: "https://example.invalid/r.git", Overwrite: true}
		}),
		gitRoute("git-config-get", "GET", "/git/config?scope=local&key=core.bare&", nil),
		gitRoute("git-config-set", "POST", "/git/config", func(rel string) any {
			return toolbox.GitSetConfigRequest{Scope: "local", Path: rel, Key: "user.name", Value: "changed"}
		}),
		gitRoute("git-config-user", "POST", "/git/config/user", func(rel string) any {
			return toolbox.GitConfigureUserRequest{Scope: "local", Path: rel, Name: "changed", Email: "c@example.com"}
		}),
		// A local remote URL is a path: the fetch, push and pull through
		// a remote at a planted link.
		{name: "git-fetch-from", control: "gitrepo", mustFail: true, probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			resp, body := e.do("POST", "/git/remotes", toolbox.GitAddRemoteRequest{Path: "gitrepo", Name: "f-" + randomHex(4), URL: rel, Fetch: true})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 201 }},
		{name: "git-push-to", control: "gitrepo", mustFail: true, probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			name := "p-" + randomHex(4)
			if resp, body := e.do("POST", "/git/remotes", toolbox.GitAddRemoteRequest{Path: "gitrepo", Name: name, URL: rel}); resp.StatusCode != 201 {
				t.Fatalf("adding the remote %s: %d %s", rel, resp.StatusCode, body)
			}
			target := "pushme"
			if rel == "gitrepo" {
				// Pushing a repository to itself: a branch it lacks.
				e.do("POST", "/git/branches", toolbox.GitBranchRequest{Path: "gitrepo", Name: "pushed"})
				target = "pushed"
			}
			resp, body := e.do("POST", "/git/push", toolbox.GitPushRequest{Path: "gitrepo", Remote: name, Branch: target})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 }},
		{name: "git-pull-from", control: "gitrepo", mustFail: true, probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			name := "l-" + randomHex(4)
			if resp, body := e.do("POST", "/git/remotes", toolbox.GitAddRemoteRequest{Path: "gitrepo", Name: name, URL: rel}); resp.StatusCode != 201 {
				t.Fatalf("adding the remote %s: %d %s", rel, resp.StatusCode, body)
			}
			resp, body := e.do("POST", "/git/pull", toolbox.GitPullRequest{Path: "gitrepo", Remote: name, Branch: "master"})
			return resp.StatusCode, body
		}, ok: func(s int, b []byte) bool { return s == 200 }},
		// A session's cwd: a command cds through the link, the next one
		// (a ready shell the server starts in the cwd the shell left)
		// reads a relative name.
		{name: "session-cwd", control: "sub", probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			sid := "s" + randomHex(4)
			e.createSession(sid)
			defer e.do("DELETE", "/process/session/"+sid, nil)
			if err := os.WriteFile(filepath.Join(e.srvRoot(), "work", "sub", "here"), []byte("in sub\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			first := e.execSync(sid, "cd "+rel)
			second := e.execSync(sid, "pwd; cat secret here; touch made-by-session")
			body, _ := json.Marshal([]toolbox.SessionExecuteResponse{first, second})
			return http.StatusOK, body
		}, ok: func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, []byte("in sub")) }},
	}
}

// gitRoute is a probe of a git route that needs a repository at its
// path: the control is the repository "gitrepo" inside the root, and no
// probe through a form may succeed. req makes the JSON body for a path;
// nil: a GET with the path in the query.
func gitRoute(name, method, route string, req func(rel string) any) escapeRoute {
	return escapeRoute{name: name, control: "gitrepo", mustFail: true, ok: func(s int, b []byte) bool { return s < 300 },
		probe: func(t *testing.T, e *testEnv, rel string) (int, []byte) {
			if req == nil {
				sep := "?"
				if strings.Contains(route, "?") {
					sep = ""
				}
				resp, body := e.do(method, route+sep+"path="+url.QueryEscape(rel), nil)
				return resp.StatusCode, body
			}
			resp, body := e.do(method, route, req(rel))
			return resp.StatusCode, body
		}}
}

// listProbe lists rel; a listed "secret" (there is none inside the root)
// is an escape.
func listProbe(query string) func(t *testing.T, e *testEnv, rel string) (int, []byte) {
	return func(t *testing.T, e *testEnv, rel string) (int, []byte) {
		resp, body := e.do("GET", "/files?"+query+"path="+url.QueryEscape(rel), nil)
		if bytes.Contains(body, []byte(`"name":"secret"`)) {
			body = append(body, escapeMarker...)
		}
		return resp.StatusCode, body
	}
}

// waitPtyExit waits for the PTY session id's command to end.
func waitPtyExit(t *testing.T, e *testEnv, id string) {
	for range 1000 {
		if info := e.ptyInfo(id); info.ExitCode != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the PTY session %s did not end", id)
}

func jsonOKEmpty(status int, body []byte) bool { return status == http.StatusOK }

// TestEscapeThroughPlantedLinks plants links through every /proc form and
// plain escapes (absolute, ".." chains) inside a confined server's root,
// then drives every path-resolving route through each: nothing outside
// the root is read, listed, found, created, changed or deleted, and no
// answer holds the outside marker. Each route's control probe (an
// in-root path) must succeed, so each probe is known to have run.
func TestEscapeThroughPlantedLinks(t *testing.T) {
	f, forms := newEscapeFixture(t)
	names := make([]string, 0, len(forms))
	for n := range forms {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, rt := range escapeRoutes() {
		t.Run(rt.name+"/control", func(t *testing.T) {
			if rt.name == "interpreter-cwd" {
				testenv.NeedTool(t, "python3", "python3")
			}
			st, body := rt.probe(t, f.e, rt.control)
			if !rt.ok(st, body) {
				t.Fatalf("control %s on %q: status %d, body %s", rt.name, rt.control, st, body)
			}
			restoreInside(t, f)
		})
		for _, form := range names {
			t.Run(rt.name+"/"+form, func(t *testing.T) {
				rel := form
				if rt.file {
					rel += "/secret"
				}
				st, body := rt.probe(t, f.e, rel)
				if bytes.Contains(body, []byte(escapeMarker)) || bytes.Contains(body, []byte(filepath.Base(f.outside)+"/secret")) {
					t.Errorf("%s through %s (-> %s): the answer reaches outside the root: status %d, body %s", rt.name, form, forms[form], st, body)
				}
				if rt.mustFail && st < 300 {
					t.Errorf("%s through %s (-> %s): status %d: it found a repository, and there is none there inside the root; body %s", rt.name, form, forms[form], st, body)
				}
				if st >= 500 {
					t.Errorf("%s through %s: status %d, want a 4xx or the in-root answer; body %s", rt.name, form, st, body)
				}
				if rt.name == "download" || rt.name == "info" {
					if st != http.StatusBadRequest && st != http.StatusNotFound {
						t.Errorf("%s through %s: status %d, want 400 or 404; body %s", rt.name, form, st, body)
					}
				}
				if got := f.snapshot(t); got != f.before {
					t.Errorf("%s through %s changed the folder outside the root:\nbefore:\n%s\nafter:\n%s", rt.name, form, f.before, got)
					restoreOutside(t, f)
				}
				if _, err := os.Lstat(filepath.Join(f.root, "work", form)); err != nil {
					// A delete may remove the planted link itself (that is
					// inside the root): plant it again for the next probe.
					if err := os.Symlink(forms[form], filepath.Join(f.root, "work", form)); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// restoreInside puts back what a control probe changed inside the root.
func restoreInside(t *testing.T, f *escapeFixture) {
	w := filepath.Join(f.root, "work")
	if err := os.MkdirAll(filepath.Join(w, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, "inside.txt"), []byte("inside needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Join(w, "inside.txt"), 0o644)
	_ = os.Chown(filepath.Join(w, "inside.txt"), os.Getuid(), os.Getgid())
}

// restoreOutside puts the outside folder back after an escape, so later
// probes are judged on their own.
func restoreOutside(t *testing.T, f *escapeFixture) {
	entries, _ := os.ReadDir(f.outside)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(f.outside, e.Name()))
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte(escapeMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Join(f.outside, "secret"), 0o644)
	_ = os.Chown(filepath.Join(f.outside, "secret"), os.Getuid(), os.Getgid())
	if err := os.MkdirAll(filepath.Join(f.outside, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "dir", "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeEscapeRepo(t, f.outside, "dir/file")
	f.before = f.snapshot(t)
}

// makeEscapeRepo makes dir a repository whose master has one commit of
// file, with a branch "pushme" there too.
func makeEscapeRepo(t *testing.T, dir, file string) {
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add(file); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1e9, 0)}
	h, err := wt.Commit("commit of "+file, &git.CommitOptions{Author: sig})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("pushme"), h)); err != nil {
		t.Fatal(err)
	}
}

// TestEscapeThroughTmpDirLink replaces the server's own tmp dir (its
// session folders, scripts and interpreter program, which a sandbox's
// processes can rename when they own it or run as the server's user) by
// a link to the server's descriptor of the folder outside the root
// (/proc/self/fd/N): making a session's folder, writing a long command's
// script and the interpreter program must not follow it.
func TestEscapeThroughTmpDirLink(t *testing.T) {
	f, forms := newEscapeFixture(t)
	e, tmp := f.e, f.e.srv.tmpDir
	if err := os.Rename(tmp, tmp+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(forms["selffd"], tmp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(tmp)
		os.Rename(tmp+".moved", tmp)
	})
	var bodies [][]byte
	for _, sid := range []string{"tmp1", "tmp2"} { // the first takes the spare shell, made before
		resp, body := e.do("POST", "/process/session", toolbox.CreateSessionRequest{SessionID: sid})
		bodies = append(bodies, body)
		if resp.StatusCode < 300 {
			e.do("DELETE", "/process/session/"+sid, nil)
		}
	}
	long := `cat "$(dirname "$0")/secret"` + "\n#" + strings.Repeat("x", maxInlineScript) + "\n"
	_, body := e.do("POST", "/process/execute", toolbox.ExecuteRequest{Command: long})
	bodies = append(bodies, body)
	if _, err := exec.LookPath("python3"); err == nil {
		_, body := e.do("POST", "/process/interpreter/context", toolbox.CreateContextRequest{Language: "python"})
		bodies = append(bodies, body)
	}
	for _, b := range bodies {
		if bytes.Contains(b, []byte(escapeMarker)) {
			t.Errorf("an answer reaches outside the root through the tmp dir: %s", b)
		}
	}
	if got := f.snapshot(t); got != f.before {
		t.Errorf("the server followed its tmp dir's link outside the root:\nbefore:\n%s\nafter:\n%s", f.before, got)
	}
}
