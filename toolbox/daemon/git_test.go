package daemon

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// getJSON sends a GET and decodes the 200 answer into v.
func (e *testEnv) getJSON(path string, v any) {
	e.t.Helper()
	if err := json.Unmarshal(e.expect(http.StatusOK, "GET", path, nil), v); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
}

func q(path string) string { return "?path=" + url.QueryEscape(path) }

func (e *testEnv) history(dir string) []toolbox.GitCommitInfo {
	e.t.Helper()
	var h []toolbox.GitCommitInfo
	e.getJSON("/git/history"+q(dir), &h)
	return h
}

func (e *testEnv) status(dir string) toolbox.GitStatus {
	e.t.Helper()
	var st toolbox.GitStatus
	e.getJSON("/git/status"+q(dir), &st)
	return st
}

// mustNotExist fails when path exists.
func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("%s exists after a failed clone (err %v)", path, err)
	}
}

// TestGitCloneHTTP clones over loopback HTTP: the default branch, a
// branch, a shallow clone, a commit; every exchange checked against the
// spec.
func TestGitCloneHTTP(t *testing.T) {
	tr := newTestRepo(t)
	base := serveGit(t, tr.root, "", "")
	e := newEnv(t, true)

	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "full"})
	if h := e.history("full"); len(h) != 2 || h[0].Hash != tr.second || h[0].Message != "second\n" || h[0].Author != "Ann" || h[0].Email != "ann@example.com" {
		t.Fatalf("history of the clone: %+v", h)
	}
	st := e.status("full")
	if st.CurrentBranch != "main" || st.Upstream != "origin/main" || !st.BranchPublished || st.Ahead != 0 || st.Behind != 0 || len(st.FileStatus) != 0 {
		t.Fatalf("status of a fresh clone: %+v", st)
	}
	b, _ := os.ReadFile(filepath.Join(e.work, "full", "README"))
	if string(b) != "two\n" {
		t.Fatalf("README = %q", b)
	}

	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "dev", Branch: "dev"})
	if h := e.history("dev"); len(h) != 3 || h[0].Hash != tr.devHead {
		t.Fatalf("history of the dev clone: %+v", h)
	}

	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "shallow", Depth: 1})
	if h := e.history("shallow"); len(h) != 1 || h[0].Hash != tr.second {
		t.Fatalf("history of a depth-1 clone: %+v", h)
	}

	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "at/first", CommitID: tr.first})
	if st := e.status("at/first"); !st.Detached || len(st.FileStatus) != 0 {
		t.Fatalf("status of a clone at a commit: %+v", st)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "at/first/README")); string(b) != "one\n" {
		t.Fatalf("README at the first commit = %q", b)
	}
}

// TestGitCloneBadInput: a missing repository, an unknown branch or
// commit, a taken destination and malformed requests fail with Daytona's
// error shape and leave nothing on disk.
func TestGitCloneBadInput(t *testing.T) {
	tr := newTestRepo(t)
	base := serveGit(t, tr.root, "", "")
	e := newErrEnv(t)
	for _, c := range []struct {
		name   string
		req    toolbox.GitCloneRequest
		status int
		code   string
	}{
		{"missing http", toolbox.GitCloneRequest{URL: base + "/nope.git", Path: "a/b/c"}, http.StatusNotFound, codeGitRepoNotFound},
		{"missing path", toolbox.GitCloneRequest{URL: filepath.Join(tr.root, "nope"), Path: "a/b/c"}, http.StatusNotFound, codeGitRepoNotFound},
		{"unknown branch", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "a/b/c", Branch: "nope"}, http.StatusNotFound, codeGitBranchNotFound},
		{"unknown commit", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "a/b/c", CommitID: strings.Repeat("ab", 20)}, http.StatusNotFound, codeNotFound},
		{"no server", toolbox.GitCloneRequest{URL: "http://127.0.0.1:1/repo.git", Path: "a/b/c"}, http.StatusInternalServerError, codeGitTransportFailed},
		{"bad branch name", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "a/b/c", Branch: "a..b"}, http.StatusBadRequest, codeBadRequest},
		{"negative depth", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "a/b/c", Depth: -1}, http.StatusBadRequest, codeBadRequest},
		{"no url", toolbox.GitCloneRequest{Path: "a/b/c"}, http.StatusBadRequest, codeBadRequest},
		{"no path", toolbox.GitCloneRequest{URL: base + "/repo.git"}, http.StatusBadRequest, codeBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			er := e.expectError(c.status, c.code, "POST", "/git/clone", c.req)
			if !strings.Contains(er.Message, ": ") {
				t.Errorf("message %q", er.Message)
			}
			mustNotExist(t, filepath.Join(e.work, "a"))
		})
	}

	t.Run("into an empty folder", func(t *testing.T) {
		dir := filepath.Join(e.work, "empty")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		e.expectError(http.StatusNotFound, codeGitRepoNotFound, "POST", "/git/clone", toolbox.GitCloneRequest{URL: base + "/nope.git", Path: "empty"})
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("the empty folder after a failed clone: %v, %v", entries, err)
		}
	})
	t.Run("into a non-empty folder", func(t *testing.T) {
		write(t, filepath.Join(e.work, "taken"), "x")
		e.expectError(http.StatusConflict, codeConflict, "POST", "/git/clone", toolbox.GitCloneRequest{URL: base + "/repo.git", Path: "."})
		if b, err := os.ReadFile(filepath.Join(e.work, "taken")); err != nil || string(b) != "x" {
			t.Fatalf("a file of the destination changed: %q %v", b, err)
		}
	})
	e.expectError(http.StatusBadRequest, codeInvalidRequestBody, "POST", "/git/clone", []byte("{"))
}

// TestGitCloneCredentials clones a repository behind basic auth: without
// credentials and with a wrong password it fails with GIT_AUTH_FAILED and
// the password in no answer; with them it works, and the password is on
// disk nowhere, not in .git/config either. Credentials stored with
// POST /git/credentials serve later clones.
func TestGitCloneCredentials(t *testing.T) {
	const user, password, wrong = "ann", "pw-Secret-42", "wrong-Secret-77"
	tr := newTestRepo(t)
	base := serveGit(t, tr.root, user, password)
	u, _ := url.Parse(base)
	e := newErrEnv(t)
	repoURL := base + "/repo.git"

	er := e.expectError(http.StatusUnauthorized, codeGitAuthFailed, "POST", "/git/clone", toolbox.GitCloneRequest{URL: repoURL, Path: "x"})
	mustNotExist(t, filepath.Join(e.work, "x"))
	if !strings.Contains(er.Message, "authentication") {
		t.Errorf("message without credentials: %q", er.Message)
	}
	withUser := strings.Replace(repoURL, "://", "://"+user+":"+wrong+"@", 1)
	for _, req := range []toolbox.GitCloneRequest{
		{URL: repoURL, Path: "x", Username: user, Password: wrong},
		{URL: withUser, Path: "x"},
	} {
		_, body := e.do("POST", "/git/clone", req)
		if strings.Contains(string(body), wrong) || !strings.Contains(string(body), codeGitAuthFailed) {
			t.Fatalf("answer to a clone with a wrong password: %s", body)
		}
		mustNotExist(t, filepath.Join(e.work, "x"))
	}

	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: repoURL, Path: "fields", Username: user, Password: password})
	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: strings.Replace(repoURL, "://", "://"+user+":"+password+"@", 1), Path: "inurl"})
	var rem toolbox.ListRemotesResponse
	e.getJSON("/git/remotes"+q("inurl"), &rem)
	if len(rem.Remotes) != 1 || rem.Remotes[0].URL != repoURL {
		t.Fatalf("remotes of a clone from a URL with credentials: %+v", rem)
	}
	noSecretOnDisk(t, e.work, password)

	// Push takes credentials the same way.
	write(t, filepath.Join(e.work, "fields", "new.txt"), "new\n")
	e.expect(http.StatusOK, "POST", "/git/add", toolbox.GitAddRequest{Path: "fields", Files: []string{"."}})
	e.expect(http.StatusOK, "POST", "/git/commit", toolbox.GitCommitRequest{Path: "fields", Message: "new", Author: "Ann", Email: "ann@example.com"})
	_, body := e.do("POST", "/git/push", toolbox.GitPushRequest{Path: "fields", Username: user, Password: wrong})
	if strings.Contains(string(body), wrong) || !strings.Contains(string(body), codeGitAuthFailed) {
		t.Fatalf("answer to a push with a wrong password: %s", body)
	}
	e.expect(http.StatusOK, "POST", "/git/push", toolbox.GitPushRequest{Path: "fields", Username: user, Password: password})
	if got := runGit(t, tr.bare, "rev-parse", "main"); got == tr.second {
		t.Fatalf("the push did not reach the served repository")
	}

	// Stored credentials serve the host's clones.
	e.expect(http.StatusOK, "POST", "/git/credentials", toolbox.GitAuthenticateRequest{Username: user, Password: password, Host: u.Host, Protocol: "http"})
	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: repoURL, Path: "stored"})
	noSecretOnDisk(t, e.work, password)
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/git/credentials", toolbox.GitAuthenticateRequest{Username: user, Password: password, Protocol: "ftp"})
}

// noSecretOnDisk fails when a file under dir holds secret.
// TestGitCloneTokenAsUser: a token given as an https URL's user name (no
// password), as many hosts take one, is a credential too: it authenticates
// the clone and is written nowhere: not in .git/config, not in the
// remotes' answer.
func TestGitCloneTokenAsUser(t *testing.T) {
	const token = "tok-Secret-1234"
	tr := newTestRepo(t)
	repoURL := serveGit(t, tr.root, token, "") + "/repo.git"
	e := newErrEnv(t)
	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: strings.Replace(repoURL, "://", "://"+token+"@", 1), Path: "tok"})
	var rem toolbox.ListRemotesResponse
	e.getJSON("/git/remotes"+q("tok"), &rem)
	if len(rem.Remotes) != 1 || rem.Remotes[0].URL != repoURL {
		t.Fatalf("remotes of a clone from a URL with a token: %+v", rem)
	}
	noSecretOnDisk(t, e.work, token)
}

func noSecretOnDisk(t *testing.T, dir, secret string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), secret) {
			t.Errorf("%s holds the password", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGitCloneLocalPath clones from a path and a file:// URL with no git
// binary in PATH: go-git serves them in the server's process.
func TestGitCloneLocalPath(t *testing.T) {
	tr := newTestRepo(t)
	e := newEnv(t, true)
	t.Setenv("PATH", t.TempDir()) // no git-upload-pack from here on
	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: tr.bare, Path: "p", Depth: 1})
	if h := e.history("p"); len(h) != 2 || h[0].Hash != tr.second {
		t.Fatalf("history of a local clone (depth is ignored, as by git): %+v", h)
	}
	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: "file://" + filepath.Join(tr.root, "work"), Path: "/" + filepath.Join(e.work, "w"), Branch: "dev"})
	if h := e.history("w"); len(h) != 3 || h[0].Hash != tr.devHead {
		t.Fatalf("history of a clone of a working tree: %+v", h)
	}
}

// TestGitWorkflow drives a repository through the routes: init, user
// config, status, add, commit, history, branches, checkout, reset,
// restore, remotes, push and pull.
func TestGitWorkflow(t *testing.T) {
	tr := newTestRepo(t)
	e := newEnv(t, true)
	t.Setenv("PATH", t.TempDir()) // the server needs no git binary
	dir := filepath.Join(e.work, "r")

	e.expect(http.StatusCreated, "POST", "/git/init", toolbox.GitInitRequest{Path: "r", InitialBranch: "trunk"})
	e.expect(http.StatusCreated, "POST", "/git/init", toolbox.GitInitRequest{Path: "r"}) // again: harmless
	e.expect(http.StatusOK, "POST", "/git/config/user", toolbox.GitConfigureUserRequest{Name: "Bob", Email: "bob@example.com", Scope: "local", Path: "r"})
	write(t, filepath.Join(dir, "a.txt"), "a\n")
	st := e.status("r")
	if st.CurrentBranch != "trunk" || len(st.FileStatus) != 1 || st.FileStatus[0] != (toolbox.GitFileStatus{Name: "a.txt", Staging: "Untracked", Worktree: "Untracked"}) {
		t.Fatalf("status before add: %+v", st)
	}
	e.expect(http.StatusOK, "POST", "/git/add", toolbox.GitAddRequest{Path: "r", Files: []string{"a.txt"}})
	if st := e.status("r"); len(st.FileStatus) != 1 || st.FileStatus[0].Staging != "Added" {
		t.Fatalf("status after add: %+v", st)
	}
	var c1 toolbox.GitCommitResponse
	json.Unmarshal(e.expect(http.StatusOK, "POST", "/git/commit", toolbox.GitCommitRequest{Path: "r", Message: "add a"}), &c1)
	if h := e.history("r"); len(h) != 1 || h[0].Hash != c1.Hash || h[0].Author != "Bob" || h[0].Email != "bob@example.com" {
		t.Fatalf("history after a commit with the configured user: %+v (commit %s)", h, c1.Hash)
	}
	var c2 toolbox.GitCommitResponse
	json.Unmarshal(e.expect(http.StatusOK, "POST", "/git/commit", toolbox.GitCommitRequest{Path: "r", Message: "empty", Author: "Cy", Email: "cy@example.com", AllowEmpty: true}), &c2)
	if h := e.history("r"); len(h) != 2 || h[0].Author != "Cy" || h[1].Hash != c1.Hash {
		t.Fatalf("history after an empty commit: %+v", h)
	}

	// Branches.
	e.expect(http.StatusCreated, "POST", "/git/branches", toolbox.GitBranchRequest{Path: "r", Name: "feature"})
	var br toolbox.ListBranchResponse
	e.getJSON("/git/branches"+q("r"), &br)
	if strings.Join(br.Branches, ",") != "feature,trunk" || br.Current != "trunk" {
		t.Fatalf("branches: %+v", br)
	}
	e.expect(http.StatusOK, "POST", "/git/checkout", toolbox.GitCheckoutRequest{Path: "r", Branch: "feature"})
	write(t, filepath.Join(dir, "b.txt"), "b\n")
	e.expect(http.StatusOK, "POST", "/git/add", toolbox.GitAddRequest{Path: "r", Files: []string{"."}})
	e.expect(http.StatusOK, "POST", "/git/commit", toolbox.GitCommitRequest{Path: "r", Message: "add b", Author: "Bob", Email: "bob@example.com"})
	e.expect(http.StatusOK, "POST", "/git/checkout", toolbox.GitCheckoutRequest{Path: "r", Branch: "trunk"})
	mustNotExist(t, filepath.Join(dir, "b.txt"))
	e.expect(http.StatusOK, "POST", "/git/checkout", toolbox.GitCheckoutRequest{Path: "r", Branch: c1.Hash})
	if st := e.status("r"); !st.Detached {
		t.Fatalf("status after checking out a commit: %+v", st)
	}
	e.expect(http.StatusOK, "POST", "/git/checkout", toolbox.GitCheckoutRequest{Path: "r", Branch: "trunk"})
	e.expect(http.StatusNoContent, "DELETE", "/git/branches", toolbox.GitDeleteBranchRequest{Path: "r", Name: "feature"})
	e.getJSON("/git/branches"+q("r"), &br)
	if strings.Join(br.Branches, ",") != "trunk" {
		t.Fatalf("branches after delete: %+v", br)
	}

	// Restore and reset.
	write(t, filepath.Join(dir, "a.txt"), "changed\n")
	e.expect(http.StatusOK, "POST", "/git/restore", toolbox.GitRestoreRequest{Path: "r", Files: []string{"a.txt"}})
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "a\n" {
		t.Fatalf("a.txt after restore = %q", b)
	}
	write(t, filepath.Join(dir, "a.txt"), "staged\n")
	e.expect(http.StatusOK, "POST", "/git/add", toolbox.GitAddRequest{Path: "r", Files: []string{filepath.Join(dir, "a.txt")}})
	e.expect(http.StatusOK, "POST", "/git/restore", toolbox.GitRestoreRequest{Path: "r", Files: []string{"a.txt"}, Staged: true})
	if st := e.status("r"); len(st.FileStatus) != 1 || st.FileStatus[0].Staging != "Unmodified" || st.FileStatus[0].Worktree != "Modified" {
		t.Fatalf("status after restore --staged: %+v", st)
	}
	e.expect(http.StatusOK, "POST", "/git/restore", toolbox.GitRestoreRequest{Path: "r", Files: []string{"a.txt"}, Source: c1.Hash, Worktree: true})
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "a\n" {
		t.Fatalf("a.txt after restore --source = %q", b)
	}
	e.expect(http.StatusOK, "POST", "/git/reset", toolbox.GitResetRequest{Path: "r", Target: c1.Hash, Mode: "soft"})
	if h := e.history("r"); len(h) != 1 {
		t.Fatalf("history after reset --soft: %+v", h)
	}
	e.expect(http.StatusOK, "POST", "/git/reset", toolbox.GitResetRequest{Path: "r", Target: c2.Hash, Mode: "hard"})
	if h := e.history("r"); len(h) != 2 || len(e.status("r").FileStatus) != 0 {
		t.Fatalf("after reset --hard: %+v", h)
	}

	// Remotes, push and pull: r pushes to the test's bare repository,
	// a clone of it pulls.
	e.expect(http.StatusCreated, "POST", "/git/remotes", toolbox.GitAddRemoteRequest{Path: "r", Name: "origin", URL: tr.bare, Fetch: true})
	var rem toolbox.ListRemotesResponse
	e.getJSON("/git/remotes"+q("r"), &rem)
	if len(rem.Remotes) != 1 || rem.Remotes[0] != (toolbox.GitRemote{Name: "origin", URL: tr.bare}) {
		t.Fatalf("remotes: %+v", rem)
	}
	e.expect(http.StatusOK, "POST", "/git/push", toolbox.GitPushRequest{Path: "r", SetUpstream: true})
	if st := e.status("r"); st.Upstream != "origin/trunk" {
		t.Fatalf("status after push --set-upstream: %+v", st)
	}
	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: tr.bare, Path: "other", Branch: "trunk"})
	write(t, filepath.Join(dir, "c.txt"), "c\n")
	e.expect(http.StatusOK, "POST", "/git/add", toolbox.GitAddRequest{Path: "r", Files: []string{"c.txt"}})
	var c3 toolbox.GitCommitResponse
	json.Unmarshal(e.expect(http.StatusOK, "POST", "/git/commit", toolbox.GitCommitRequest{Path: "r", Message: "add c", Author: "Bob", Email: "bob@example.com"}), &c3)
	if st := e.status("r"); st.Ahead != 1 || st.Behind != 0 {
		t.Fatalf("status one commit ahead: %+v", st)
	}
	e.expect(http.StatusOK, "POST", "/git/push", toolbox.GitPushRequest{Path: "r"})
	e.expect(http.StatusOK, "POST", "/git/pull", toolbox.GitPullRequest{Path: "other"})
	if h := e.history("other"); len(h) != 3 || h[0].Hash != c3.Hash {
		t.Fatalf("history after pull: %+v", h)
	}
	e.expect(http.StatusOK, "POST", "/git/pull", toolbox.GitPullRequest{Path: "other"}) // up to date
}

// TestGitConfig gets and sets values at the global and local scopes; an
// unset key is null.
func TestGitConfig(t *testing.T) {
	e := newEnv(t, true)
	e.expect(http.StatusCreated, "POST", "/git/init", toolbox.GitInitRequest{Path: "r"})
	get := func(query string) *string {
		var r toolbox.GitConfigResponse
		e.getJSON("/git/config?"+query, &r)
		return r.Value
	}
	// An unset key is null, as the spec's description says, although its
	// schema does not declare the value nullable: checked unvalidated.
	if b := e.raw.expect(http.StatusOK, "GET", "/git/config?key=user.name", nil); string(b) != `{"value":null}` {
		t.Fatalf("unset user.name: %s", b)
	}
	e.expect(http.StatusOK, "POST", "/git/config", toolbox.GitSetConfigRequest{Key: "user.name", Value: "Global Ann"})
	e.expect(http.StatusOK, "POST", "/git/config", toolbox.GitSetConfigRequest{Key: "remote.up.url", Value: "https://example.com/x", Scope: "local", Path: "r"})
	e.expect(http.StatusOK, "POST", "/git/config/user", toolbox.GitConfigureUserRequest{Name: "Local Ann", Email: "l@example.com", Scope: "local", Path: "r"})
	for query, want := range map[string]string{
		"key=user.name":                        "Global Ann",
		"key=user.name&scope=global":           "Global Ann",
		"key=user.name&scope=local&path=r":     "Local Ann",
		"key=remote.up.url&scope=local&path=r": "https://example.com/x",
	} {
		if v := get(query); v == nil || *v != want {
			t.Errorf("config %s = %v, want %q", query, v, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(e.work, ".gitconfig")); err != nil || !strings.Contains(string(b), "Global Ann") {
		t.Fatalf("global config file: %q %v", b, err)
	}
	var rem toolbox.ListRemotesResponse
	e.getJSON("/git/remotes"+q("r"), &rem)
	if len(rem.Remotes) != 1 || rem.Remotes[0].Name != "up" {
		t.Fatalf("remotes after setting remote.up.url: %+v", rem)
	}
}

// TestGitBadInput: malformed requests and missing things get Daytona's
// error shape with the right status and code.
func TestGitBadInput(t *testing.T) {
	e := newErrEnv(t)
	e.expect(http.StatusCreated, "POST", "/git/init", toolbox.GitInitRequest{Path: "r"})
	if err := os.Mkdir(filepath.Join(e.work, "plain"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"GET", "/git/status", nil, http.StatusBadRequest, codeBadRequest},
		{"GET", "/git/status?path=plain", nil, http.StatusNotFound, codeGitRepoNotFound},
		{"GET", "/git/history?path=nope", nil, http.StatusNotFound, codeGitRepoNotFound},
		{"GET", "/git/branches?path=../x", nil, http.StatusNotFound, codeGitRepoNotFound}, // resolves from the work dir
		{"POST", "/git/add", toolbox.GitAddRequest{Path: "r"}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/add", toolbox.GitAddRequest{Path: "r", Files: []string{"../outside"}}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/add", toolbox.GitAddRequest{Path: "r", Files: []string{"missing.txt"}}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/commit", toolbox.GitCommitRequest{Path: "r", Message: "m", Author: "a", Email: "e"}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/commit", toolbox.GitCommitRequest{Path: "r", Author: "a", Email: "e"}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/branches", toolbox.GitBranchRequest{Path: "r", Name: "x"}, http.StatusConflict, codeConflict},
		{"POST", "/git/branches", toolbox.GitBranchRequest{Path: "r", Name: "a b"}, http.StatusBadRequest, codeBadRequest},
		{"DELETE", "/git/branches", toolbox.GitDeleteBranchRequest{Path: "r", Name: "nope"}, http.StatusNotFound, codeGitBranchNotFound},
		{"POST", "/git/checkout", toolbox.GitCheckoutRequest{Path: "r", Branch: "nope"}, http.StatusNotFound, codeGitBranchNotFound},
		{"POST", "/git/reset", toolbox.GitResetRequest{Path: "r", Mode: "sideways"}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/restore", toolbox.GitRestoreRequest{Path: "r"}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/push", toolbox.GitPushRequest{Path: "r"}, http.StatusNotFound, codeNotFound},
		{"POST", "/git/pull", toolbox.GitPullRequest{Path: "r"}, http.StatusNotFound, codeNotFound},
		{"POST", "/git/remotes", toolbox.GitAddRemoteRequest{Path: "r", Name: "", URL: "/x"}, http.StatusBadRequest, codeBadRequest},
		{"GET", "/git/config?key=nodot", nil, http.StatusBadRequest, codeBadRequest},
		{"GET", "/git/config?key=user.name&scope=local", nil, http.StatusBadRequest, codeBadRequest},
		{"GET", "/git/config?key=user.name&scope=galaxy", nil, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/config", toolbox.GitSetConfigRequest{Key: "user.name", Value: "a\nb"}, http.StatusBadRequest, codeBadRequest},
		{"POST", "/git/init", toolbox.GitInitRequest{Path: "s", InitialBranch: "a..b"}, http.StatusBadRequest, codeBadRequest},
	} {
		e.expectError(c.status, c.code, c.method, c.path, c.body)
	}
	mustNotExist(t, filepath.Join(e.work, "s"))
	mustNotExist(t, filepath.Join(e.work, ".gitconfig"))
}
