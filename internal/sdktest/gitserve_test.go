package sdktest

import (
	"io"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// gitRepo is a repository the test serves over smart HTTP on the stub's
// loopback server, made with the host's git.
type gitRepo struct {
	url   string            // what to clone
	heads map[string]string // branch → commit
}

// gitPath finds the host's git, or skips (fails under
// AGENTBOX_REQUIRE_ALL=1).
func gitPath(t *testing.T) string {
	t.Helper()
	return testenv.NeedTool(t, "git", "git")
}

// hostGit runs the host's git in dir, with no user or system config, and
// returns its output, trimmed.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(gitPath(t), args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=sdktest", "GIT_AUTHOR_EMAIL=sdktest@example.invalid",
		"GIT_COMMITTER_NAME=sdktest", "GIT_COMMITTER_EMAIL=sdktest@example.invalid"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// serveGitRepo makes a repository with branches main (README.md) and
// feature (README.md and feature.txt) and serves it with git http-backend
// at {cp.base}/git/repo.git.
func serveGitRepo(t *testing.T, cp *controlPlane) gitRepo {
	t.Helper()
	src := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hostGit(t, src, "init", "-q", "-b", "main")
	write("README.md", "hello from main\n")
	hostGit(t, src, "add", ".")
	hostGit(t, src, "commit", "-q", "-m", "main")
	hostGit(t, src, "checkout", "-q", "-b", "feature")
	write("feature.txt", "on the feature branch\n")
	hostGit(t, src, "add", ".")
	hostGit(t, src, "commit", "-q", "-m", "feature")
	hostGit(t, src, "checkout", "-q", "main")
	repo := gitRepo{heads: map[string]string{
		"main":    hostGit(t, src, "rev-parse", "main"),
		"feature": hostGit(t, src, "rev-parse", "feature"),
	}}
	root := t.TempDir()
	hostGit(t, root, "clone", "-q", "--bare", src, "repo.git")

	cp.mux.Handle("/git/", &cgi.Handler{
		Path: gitPath(t),
		Root: "/git",
		Args: []string{"http-backend"},
		Env: []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"),
			"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
		Stderr: io.Discard,
	})
	repo.url = cp.base + "/git/repo.git"
	return repo
}

// TestGitRepo checks the test's repository server with the host's git, so
// that a failing SDK clone is the toolbox server's doing.
func TestGitRepo(t *testing.T) {
	repo := serveGitRepo(t, newControlPlane(t))
	dir := filepath.Join(t.TempDir(), "clone")
	hostGit(t, "", "clone", "-q", "--branch", "feature", repo.url, dir)
	if got := hostGit(t, dir, "rev-parse", "HEAD"); got != repo.heads["feature"] {
		t.Errorf("the clone's HEAD is %s, want feature's %s", got, repo.heads["feature"])
	}
}
