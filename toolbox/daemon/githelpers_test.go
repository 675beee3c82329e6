package daemon

import (
	"crypto/subtle"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// runGit runs git in dir with a fixed identity and no user configuration.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Ann", "GIT_AUTHOR_EMAIL=ann@example.com", "GIT_COMMITTER_NAME=Ann", "GIT_COMMITTER_EMAIL=ann@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// testRepo is a repository a test made: a bare repository under root
// (served as /repo.git) with branches main (commits one, two) and dev
// (one commit more), and a tag v1 on the first commit.
type testRepo struct {
	root    string // the folder served
	bare    string // root/repo.git
	first   string // hash of the first commit
	second  string // hash of main's head
	devHead string // hash of dev's head
}

func newTestRepo(t testing.TB) *testRepo {
	t.Helper()
	testenv.NeedTool(t, "git", "git")
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, work, "init", "-q", "-b", "main")
	write(t, filepath.Join(work, "README"), "one\n")
	runGit(t, work, "add", ".")
	runGit(t, work, "commit", "-q", "-m", "first")
	tr := &testRepo{root: root, bare: filepath.Join(root, "repo.git")}
	tr.first = runGit(t, work, "rev-parse", "HEAD")
	runGit(t, work, "tag", "v1")
	write(t, filepath.Join(work, "README"), "two\n")
	runGit(t, work, "commit", "-q", "-am", "second")
	tr.second = runGit(t, work, "rev-parse", "HEAD")
	runGit(t, work, "checkout", "-q", "-b", "dev")
	write(t, filepath.Join(work, "dev.txt"), "dev\n")
	runGit(t, work, "add", ".")
	runGit(t, work, "commit", "-q", "-m", "on dev")
	tr.devHead = runGit(t, work, "rev-parse", "HEAD")
	runGit(t, work, "checkout", "-q", "main")
	runGit(t, root, "clone", "-q", "--bare", work, tr.bare)
	runGit(t, tr.bare, "config", "http.receivepack", "true")
	return tr
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// serveGit serves the repositories of root over smart HTTP on loopback
// with git http-backend. With a user, requests must carry that user and
// password (basic auth), as on a private repository.
func serveGit(t testing.TB, root, user, password string) string {
	t.Helper()
	srv := httptest.NewServer(gitHandler(t, root, user, password))
	t.Cleanup(srv.Close)
	return srv.URL
}

// gitHandler is the handler serveGit serves.
func gitHandler(t testing.TB, root, user, password string) http.Handler {
	t.Helper()
	gitBin := testenv.NeedTool(t, "git", "git")
	backend := &cgi.Handler{
		Path:   gitBin,
		Args:   []string{"http-backend"},
		Env:    []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root},
		Stderr: io.Discard, // "Not a git repository" for the missing ones
	}
	h := http.Handler(backend)
	if user != "" {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u+"\x00"+p), []byte(user+"\x00"+password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			backend.ServeHTTP(w, r)
		})
	}
	return h
}
