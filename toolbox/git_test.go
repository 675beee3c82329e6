package toolbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// TestClientGit drives the git routes through the client against the
// daemon (validated against the spec): a repository made with init,
// pushed to a bare one and cloned from it. No git binary is involved.
func TestClientGit(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // the daemon's global git config
	c, work := daemonEnv(t, extended, toolbox.ClientOptions{})
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.GitInit(ctx, toolbox.GitInitRequest{Path: "r", InitialBranch: "main"}))
	must(c.GitInit(ctx, toolbox.GitInitRequest{Path: "bare.git", Bare: true}))
	must(c.GitConfigureUser(ctx, toolbox.GitConfigureUserRequest{Name: "Ann", Email: "ann@example.com"}))
	if v, ok, err := c.GitConfig(ctx, "user.email", "", ""); err != nil || !ok || v != "ann@example.com" {
		t.Fatalf("GitConfig(user.email) = %q %v %v", v, ok, err)
	}
	// An unset key's value is null, which the spec's description promises
	// but its schema does not allow: asked without validation.
	raw, _ := daemonEnvV(t, extended, false, toolbox.ClientOptions{})
	if _, ok, err := raw.GitConfig(ctx, "core.nothing", "", ""); err != nil || ok {
		t.Fatalf("GitConfig of an unset key: %v %v", ok, err)
	}
	must(os.WriteFile(filepath.Join(work, "r", "f.txt"), []byte("1\n"), 0o644))
	must(c.GitAdd(ctx, "r", "f.txt"))
	hash, err := c.GitCommit(ctx, toolbox.GitCommitRequest{Path: "r", Message: "one"})
	must(err)
	if h, err := c.GitHistory(ctx, "r"); err != nil || len(h) != 1 || h[0].Hash != hash || h[0].Author != "Ann" {
		t.Fatalf("GitHistory = %+v, %v", h, err)
	}
	must(c.GitCreateBranch(ctx, "r", "side"))
	must(c.GitCheckout(ctx, "r", "side"))
	if b, err := c.GitBranches(ctx, "r"); err != nil || strings.Join(b.Branches, ",") != "main,side" || b.Current != "side" {
		t.Fatalf("GitBranches = %+v, %v", b, err)
	}
	must(c.GitCheckout(ctx, "r", "main"))
	must(c.GitDeleteBranch(ctx, "r", "side"))

	must(c.GitAddRemote(ctx, toolbox.GitAddRemoteRequest{Path: "r", Name: "origin", URL: filepath.Join(work, "bare.git")}))
	if rs, err := c.GitRemotes(ctx, "r"); err != nil || len(rs) != 1 || rs[0].Name != "origin" {
		t.Fatalf("GitRemotes = %+v, %v", rs, err)
	}
	must(c.GitPush(ctx, toolbox.GitPushRequest{Path: "r", SetUpstream: true}))
	must(c.GitClone(ctx, toolbox.GitCloneRequest{URL: filepath.Join(work, "bare.git"), Path: "copy", Branch: "main"}))

	must(os.WriteFile(filepath.Join(work, "r", "f.txt"), []byte("2\n"), 0o644))
	if st, err := c.GitStatus(ctx, "r"); err != nil || len(st.FileStatus) != 1 || st.FileStatus[0].Worktree != toolbox.GitStatusModified || st.Upstream != "origin/main" {
		t.Fatalf("GitStatus = %+v, %v", st, err)
	}
	must(c.GitAdd(ctx, "r", "."))
	hash2, err := c.GitCommit(ctx, toolbox.GitCommitRequest{Path: "r", Message: "two"})
	must(err)
	must(c.GitPush(ctx, toolbox.GitPushRequest{Path: "r"}))
	must(c.GitPull(ctx, toolbox.GitPullRequest{Path: "copy"}))
	if h, err := c.GitHistory(ctx, "copy"); err != nil || len(h) != 2 || h[0].Hash != hash2 {
		t.Fatalf("history of the clone after pull = %+v, %v", h, err)
	}
	must(c.GitReset(ctx, toolbox.GitResetRequest{Path: "copy", Mode: "hard", Target: hash}))
	must(os.WriteFile(filepath.Join(work, "copy", "f.txt"), []byte("x\n"), 0o644))
	must(c.GitRestore(ctx, toolbox.GitRestoreRequest{Path: "copy", Files: []string{"f.txt"}}))
	if b, _ := os.ReadFile(filepath.Join(work, "copy", "f.txt")); string(b) != "1\n" {
		t.Fatalf("f.txt after reset and restore = %q", b)
	}
	must(c.GitSetCredentials(ctx, toolbox.GitAuthenticateRequest{Username: "u", Password: "p"}))

	if _, err := c.GitStatus(ctx, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("GitStatus of no repository: %v", err)
	}
	if err := c.GitAdd(ctx, "r"); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("GitAdd without files: %v", err)
	}
}

// TestClientGitCloneBadCredentials: a clone refused for its credentials
// fails with a 401 GIT_AUTH_FAILED error that shows neither the password
// given in the request nor one given in the URL, and leaves nothing.
func TestClientGitCloneBadCredentials(t *testing.T) {
	const password = "hunter2-Secret-91"
	git := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
	}))
	defer git.Close()
	c, work := daemonEnv(t, extended, toolbox.ClientOptions{})
	for _, req := range []toolbox.GitCloneRequest{
		{URL: git.URL + "/r.git", Path: "x", Username: "ann", Password: password},
		{URL: strings.Replace(git.URL, "://", "://ann:"+password+"@", 1) + "/r.git", Path: "x"},
	} {
		err := c.GitClone(context.Background(), req)
		var ae *toolbox.APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || ae.Code != "GIT_AUTH_FAILED" {
			t.Fatalf("clone with bad credentials: %v", err)
		}
		if strings.Contains(err.Error(), password) || strings.Contains(string(ae.Body), password) {
			t.Fatalf("the error shows the password: %v", err)
		}
		if _, err := os.Stat(filepath.Join(work, "x")); !os.IsNotExist(err) {
			t.Fatalf("a failed clone left %s", filepath.Join(work, "x"))
		}
	}
}

// TestClientGitRedactsEchoedPassword: a server that echoes the request in
// its error (not ours) does not make the client show the password.
func TestClientGitRedactsEchoedPassword(t *testing.T) {
	const password = "echoed-Secret-55"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"statusCode":500,"message":"clone failed for password ` + password + `","code":"INTERNAL_SERVER_ERROR"}`))
	}))
	defer srv.Close()
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.GitClone(context.Background(), toolbox.GitCloneRequest{URL: "https://example.com/r.git", Path: "x", Password: password})
	var ae *toolbox.APIError
	if !errors.As(err, &ae) || strings.Contains(err.Error(), password) || strings.Contains(string(ae.Body), password) {
		t.Fatalf("error: %v (body %s)", err, ae.Body)
	}
}
