// Package testrootfs makes small root file systems for tests of images:
// a few of the host's programs with their libraries, in a temporary
// folder, so that a sandbox made of one has a shell without any download.
package testrootfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// OSRelease is the /etc/os-release of the root file systems Make makes.
const OSRelease = "ID=agentboxtest\nNAME=\"agentbox test image\"\n"

// Make makes a small root file system folder, owned by root: a few
// of the host's programs with their libraries, its own /etc/os-release,
// and links that name host paths (/etc/hostlink → /etc/os-release,
// /etc/rellink → ../../../../etc/os-release), which must resolve inside
// the sandbox.
func Make(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{"bin", "lib", "lib64", "sbin"} {
		if target, err := os.Readlink("/" + top); err == nil {
			if err := os.Symlink(target, filepath.Join(root, top)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, prog := range []string{"sh", "cat", "ls", "id", "mkdir", "rm", "touch", "stat", "chown", "grep", "env", "pwd", "sleep", "ln", "yes", "head"} {
		p, err := exec.LookPath(prog)
		if err != nil {
			testenv.Skipf(t, "the test image needs %s: %v", prog, err)
		}
		copyInto(t, root, p)
		out, _ := exec.Command("ldd", p).Output()
		for _, line := range strings.Split(string(out), "\n") {
			for _, f := range strings.Fields(line) {
				if strings.HasPrefix(f, "/") {
					copyInto(t, root, f)
				}
			}
		}
	}
	for name, content := range map[string]string{"etc/os-release": OSRelease, "usr/share/marker": "image\n"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"etc/hostlink": "/etc/os-release", "etc/rellink": "../../../../etc/os-release"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// copyInto copies the host file p (its content, at the path its
// links lead to) into root, with a link from p's own name when it is one.
func copyInto(t testing.TB, root, p string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(root, real)
	if _, err := os.Lstat(dst); err != nil {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	if link := filepath.Join(root, dir, filepath.Base(p)); link != dst {
		if _, err := os.Lstat(link); err != nil {
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
		}
	}
}
