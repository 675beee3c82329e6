package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// runAsUID is the user TestCredential's commands run as.
const runAsUID = 4321

// newRunAsEnv starts a server whose commands run as runAsUID, with
// capabilities dropped as in a sandbox, and a work dir of that user's.
func newRunAsEnv(t *testing.T) *testEnv {
	t.Helper()
	testenv.NeedRoot(t, "needs root: only root can run commands as another user")
	base, err := os.MkdirTemp("", "runas")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	work := filepath.Join(base, "work")
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, runAsUID, runAsUID); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, true, func(o *Options) {
		o.WorkDir, o.DropCapabilities = work, true
		o.Credential = &syscall.Credential{Uid: runAsUID, Gid: runAsUID}
	})
}

// ownerOf returns the uid and gid owning path.
func ownerOf(t *testing.T, path string) (int, int) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid), int(st.Gid)
}

// expectOwned fails unless the user commands run as owns every path.
func expectOwned(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if u, g := ownerOf(t, p); u != runAsUID || g != runAsUID {
			t.Errorf("%s is owned by %d:%d, want %d:%d", p, u, g, runAsUID, runAsUID)
		}
	}
}

// TestCredential: with Options.Credential, every kind of command runs as
// that user, and what the server makes for a client (uploads, folders,
// git repositories, its scripts for long commands) is that user's.
func TestCredential(t *testing.T) {
	e := newRunAsEnv(t)
	const ids = "echo $(id -u):$(id -g)"
	want := "4321:4321"

	t.Run("one-shot", func(t *testing.T) {
		var one toolbox.ExecuteResponse
		json.Unmarshal(e.expect(http.StatusOK, "POST", "/process/execute", toolbox.ExecuteRequest{Command: ids}), &one)
		if got := strings.TrimSpace(one.Result); got != want {
			t.Errorf("one-shot ids %q, want %q", got, want)
		}
	})
	t.Run("session", func(t *testing.T) {
		e.createSession("s")
		r := e.execSync("s", ids+"; echo made > by-session")
		if r.Stdout == nil || strings.TrimSpace(*r.Stdout) != want {
			t.Fatalf("session answer %+v, want ids %q", r, want)
		}
		expectOwned(t, filepath.Join(e.work, "by-session"))
		// A script too long to pass inline is a file the shell reads.
		long := ids + " #" + strings.Repeat("x", maxInlineScript)
		r = e.execSync("s", long)
		if r.Stdout == nil || strings.TrimSpace(*r.Stdout) != want {
			t.Errorf("long script answer %+v, want ids %q", r, want)
		}
	})
	t.Run("files", func(t *testing.T) {
		e.raw.expect(http.StatusOK, "POST", "/files/upload-v2?path=up/a/file.txt", []byte("x"), "Content-Type", "application/octet-stream")
		e.expect(http.StatusCreated, "POST", "/files/folder?path=dir/b&mode=0755", nil)
		expectOwned(t, filepath.Join(e.work, "up"), filepath.Join(e.work, "up/a"), filepath.Join(e.work, "up/a/file.txt"),
			filepath.Join(e.work, "dir"), filepath.Join(e.work, "dir/b"))
	})
	t.Run("files as the user only", func(t *testing.T) {
		private := filepath.Join(filepath.Dir(e.work), "private")
		if err := os.Mkdir(private, 0o700); err != nil {
			t.Fatal(err)
		}
		e.raw.expectError(http.StatusForbidden, "FILE_ACCESS_DENIED", "POST", "/files/upload-v2?path="+private+"/f", []byte("x"), "Content-Type", "application/octet-stream")
		if _, err := os.Stat(filepath.Join(private, "f")); err == nil {
			t.Error("an upload into root's private folder succeeded")
		}
	})
	t.Run("git", func(t *testing.T) {
		e.expect(http.StatusCreated, "POST", "/git/init", toolbox.GitInitRequest{Path: "repo"})
		expectOwned(t, filepath.Join(e.work, "repo"), filepath.Join(e.work, "repo/.git"), filepath.Join(e.work, "repo/.git/HEAD"))
	})
}

// TestAsUserNests: asUser runs with the user's file system ids, nested
// calls keep them, and the thread has its own back afterwards.
func TestAsUserNests(t *testing.T) {
	e := newRunAsEnv(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	check := func(when string, want int) {
		t.Helper()
		if u, g := fsIDs(); u != want || g != want {
			t.Errorf("%s: file system ids %d:%d, want %d", when, u, g, want)
		}
	}
	err := e.srv.asUser(func() error {
		check("inside", runAsUID)
		err := e.srv.asUser(func() error { check("nested", runAsUID); return nil })
		check("after the nested call", runAsUID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	check("after", 0)
}
