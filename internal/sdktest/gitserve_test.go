package sdktest

import (
	"io"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo is a repository the test serves over smart HTTP on the stub's
// loopback server, made with the host's git.
type gitRepo struct {
	url   string            // what to clone
	heads map[string]string // branch → commit
}

// serveGitRepo makes a repository with branches main (README.md) and
// feature (README.md and feature.txt) and serves it with git http-backend
// at {cp.base}/git/repo.git. It skips (fails under AGENTBOX_REQUIRE_ALL=1)
// without git.
func serveGitRepo(t *testing.T, cp *controlPlane) gitRepo {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		unavailable(t, "git is not installed (Debian package git): %v", err)
	}
	home := t.TempDir()
	env := []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(gitPath, args...)
		cmd.Dir = dir
		cmd.Env = append(env, "GIT_AUTHOR_NAME=sdktest", "GIT_AUTHOR_EMAIL=sdktest@example.invalid",
			"GIT_COMMITTER_NAME=sdktest", "GIT_COMMITTER_EMAIL=sdktest@example.invalid")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	src := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(src, "init", "-q", "-b", "main")
	write("README.md", "hello from main\n")
	git(src, "add", ".")
	git(src, "commit", "-q", "-m", "main")
	git(src, "checkout", "-q", "-b", "feature")
	write("feature.txt", "on the feature branch\n")
	git(src, "add", ".")
	git(src, "commit", "-q", "-m", "feature")
	git(src, "checkout", "-q", "main")
	repo := gitRepo{heads: map[string]string{
		"main":    git(src, "rev-parse", "main"),
		"feature": git(src, "rev-parse", "feature"),
	}}
	root := t.TempDir()
	git(root, "clone", "-q", "--bare", src, "repo.git")

	cp.mux.Handle("/git/", &cgi.Handler{
		Path:   gitPath,
		Root:   "/git",
		Args:   []string{"http-backend"},
		Env:    append(env, "GIT_PROJECT_ROOT="+root, "GIT_HTTP_EXPORT_ALL=1"),
		Stderr: io.Discard,
	})
	repo.url = cp.base + "/git/repo.git"
	return repo
}

// gitHead returns the commit checked out in the clone at dir, read with
// the host's git.
func gitHead(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("git", "-C", dir, "rev-parse", "HEAD")
	cmd.Env = []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git rev-parse HEAD in %s: %v\n%s", dir, err, out)
	}
	return strings.TrimSpace(string(out))
}
