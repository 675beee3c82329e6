package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// makeRepo makes a repository with one commit of hello.txt in dir, with
// go-git (no git binary).
func makeRepo(t *testing.T, dir string) {
	t.Helper()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Add("hello.txt"); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "Ann", Email: "ann@example.com", When: time.Now()}
	if _, err := w.Commit("first", &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
}

func TestGitClone(t *testing.T) {
	h := newHarness(t)
	src := filepath.Join(t.TempDir(), "project.git")
	makeRepo(t, src)

	if r := h.must("git", "clone", src); r.stdout != "cloned "+src+" into project\n" {
		t.Fatalf("git clone: %v", r)
	}
	if r := h.must("exec", "--", "cat", "project/hello.txt"); r.stdout != "hello from git\n" {
		t.Fatalf("the cloned file: %v", r)
	}
	r := h.must("--json", "git", "clone", "--id", "other", "file://"+src, "sub/dir")
	checkJSON(t, "git clone --json", r.stdout, `{"sandbox":"other","url":"file://`+src+`","path":"sub/dir"}`)
	if r := h.must("exec", "--id", "other", "--", "cat", "sub/dir/hello.txt"); r.stdout != "hello from git\n" {
		t.Fatalf("the file cloned into DIR: %v", r)
	}

	// A second clone into the same folder fails and leaves it alone.
	if r := h.run("git", "clone", src); r.code != ExitError || !strings.Contains(r.stderr, "not an empty folder") {
		t.Fatalf("clone into a taken folder: %v", r)
	}
	if r := h.run("git", "clone", filepath.Join(t.TempDir(), "missing")); r.code != ExitError || !strings.Contains(r.stderr, "GIT_REPO_NOT_FOUND") {
		t.Fatalf("clone of a missing repository: %v", r)
	}
}

// TestGitClonePasswordStdin: the password read from standard input
// authenticates, and a refused one appears in no output.
func TestGitClonePasswordStdin(t *testing.T) {
	const password = "stdin-Secret-31"
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, got, _ = r.BasicAuth()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	h := newHarness(t)
	h.stdin = strings.NewReader(password + "\n")
	r := h.run("git", "clone", "--username", "ann", "--password-stdin", srv.URL+"/private.git")
	if r.code != ExitError || !strings.Contains(r.stderr, "GIT_AUTH_FAILED") || strings.Contains(r.stdout+r.stderr, password) {
		t.Fatalf("clone with a refused password: %v", r)
	}
	if got != password {
		t.Fatalf("the server got password %q", got)
	}
	if r := h.run("exec", "--", "test", "-e", "private"); r.code != 1 {
		t.Fatalf("a failed clone left its folder: %v", r)
	}
}

func TestGitCloneUsage(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"git", "clone"},
		{"git", "clone", "a", "b", "c"},
		{"git", "clone", "--depth", "-1", "https://example.com/r.git"},
		{"git", "clone", "https://example.com/"},
		{"git", "pull"},
	} {
		if r := h.run(args...); r.code != ExitUsage {
			t.Errorf("agentbox %s: %v, want exit %d", strings.Join(args, " "), r, ExitUsage)
		}
	}
	h.stdin = strings.NewReader("")
	if r := h.run("git", "clone", "--password-stdin", "https://example.com/r.git"); r.code != ExitUsage || !strings.Contains(r.stderr, "no password") {
		t.Errorf("--password-stdin with empty input: %v", r)
	}
	for url, want := range map[string]string{
		"https://example.com/a/repo.git": "repo", "https://example.com/a/repo/": "repo",
		"git@example.com:me/thing.git": "thing", "/srv/x.git": "x", "../rel": "rel",
	} {
		if got := cloneDir(url); got != want {
			t.Errorf("cloneDir(%q) = %q, want %q", url, got, want)
		}
	}
}
