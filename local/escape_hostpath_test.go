//go:build linux

package local_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// hostMarkers are the host's objects the escape probes try to reach: a
// folder (a git repository) readable by every user, with a marker file,
// and a folder writable by every user, with a file any user may change
// or remove; both outside the state dir, under the host's /tmp (which the
// sandbox does not see).
type hostMarkers struct {
	dir, file, text string // the readable folder, its file and the file's text
	wdir, victim    string // the writable folder and its file
}

const victimText = "victim\n"

func newHostMarkers(t *testing.T) *hostMarkers {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	tag := hex.EncodeToString(b)
	m := &hostMarkers{text: "agentbox-host-marker-" + tag}
	var err error
	if m.dir, err = os.MkdirTemp("", "agentbox-hostmarker-"+tag+"-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(m.dir) })
	if m.wdir, err = os.MkdirTemp("", "agentbox-hostwrite-"+tag+"-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(m.wdir) })
	if _, err := git.PlainInit(m.dir, false); err != nil {
		t.Fatal(err)
	}
	m.file = filepath.Join(m.dir, "marker.txt")
	m.victim = filepath.Join(m.wdir, "victim.txt")
	must(t, os.WriteFile(m.file, []byte(m.text+"\n"), 0o644))
	// Open to every user (the sandbox's are other host uids).
	must(t, filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	}))
	must(t, os.Chmod(m.wdir, 0o777))
	m.resetWritable(t)
	return m
}

// resetWritable puts the writable folder back as it was: the victim file
// alone, unchanged.
func (m *hostMarkers) resetWritable(t *testing.T) {
	t.Helper()
	ents, _ := os.ReadDir(m.wdir)
	for _, e := range ents {
		os.RemoveAll(filepath.Join(m.wdir, e.Name()))
	}
	must(t, os.WriteFile(m.victim, []byte(victimText), 0o666))
	must(t, os.Chmod(m.victim, 0o666))
}

// changed says how the host's folders differ from what newHostMarkers
// made, or "".
func (m *hostMarkers) changed() string {
	var out []string
	if b, err := os.ReadFile(m.file); err != nil || string(b) != m.text+"\n" {
		out = append(out, fmt.Sprintf("marker file now %q (%v)", b, err))
	}
	if fi, err := os.Stat(m.file); err == nil && fi.Mode().Perm() != 0o644 {
		out = append(out, "marker file mode now "+fi.Mode().String())
	}
	ents, _ := os.ReadDir(m.wdir)
	for _, e := range ents {
		if e.Name() != "victim.txt" {
			out = append(out, "writable folder gained "+e.Name())
		}
	}
	if b, err := os.ReadFile(m.victim); err != nil || string(b) != victimText {
		out = append(out, fmt.Sprintf("victim file now %q (%v)", b, err))
	}
	if fi, err := os.Stat(m.victim); err == nil && fi.Mode().Perm() != 0o666 {
		out = append(out, "victim file mode now "+fi.Mode().String())
	}
	return strings.Join(out, "; ")
}

// procForms are the /proc paths through which a command names a
// descriptor, root or working directory of the toolbox (pid 1 in the
// sandbox) or of the process that resolves the path: "%s" is the
// descriptor's number.
var procForms = []string{"/proc/self/fd/%s", "/proc/thread-self/fd/%s", "/proc/1/fd/%s", "/proc/1/task/1/fd/%s"}

// procDirForms are the roots and working directories so named.
var procDirForms = []string{"/proc/self/root", "/proc/self/cwd", "/proc/thread-self/cwd", "/proc/1/root", "/proc/1/cwd"}

// linkName names the symlink of the /proc form p for the route kind.
func linkName(kind, p string) string {
	return kind + strings.ReplaceAll(strings.TrimPrefix(p, "/proc/"), "/", "-")
}

// TestEscapeHostPaths: a command plants symlinks through every /proc form
// of the toolbox's descriptors (found from the host), roots and working
// directories, followed by ".." chains to a host folder; no toolbox route
// driven on them (files, search, git, execute's working directory, a
// session's cd) reads, lists, finds, changes or writes the host's files,
// while each route works on a folder of the sandbox (its control).
func TestEscapeHostPaths(t *testing.T) {
	needRoot(t)
	ctx := t.Context()
	m := newHostMarkers(t)
	sb := newSandbox(t, local.Options{})
	c := sb.Client()
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	home, err := c.UserHomeDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := local.InitPID(sb)
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		fds = append(fds, e.Name())
	}
	// A host path's ".." chain: ".." at a root stays there, so enough of
	// them reach the root of whatever file system the link starts on.
	ups := strings.Repeat("../", 48)
	var forms []string
	for _, fd := range fds {
		for _, f := range procForms {
			forms = append(forms, fmt.Sprintf(f, fd))
		}
	}
	forms = append(forms, procDirForms...)
	forms = append(forms, home) // a plain ".." chain from the home
	links := map[string]string{}
	for _, f := range forms {
		links[linkName("r-", f)] = f + "/" + ups + strings.TrimPrefix(m.dir, "/")
		links[linkName("w-", f)] = f + "/" + ups + strings.TrimPrefix(m.wdir, "/")
	}
	esc := home + "/esc"
	var plant strings.Builder
	plant.WriteString("mkdir -p " + esc + " ~/ctl ~/ctlw && printf 'control-marker\\n' > ~/ctl/marker.txt && printf '" + victimText[:len(victimText)-1] + "\\n' > ~/ctlw/victim.txt && chmod 666 ~/ctlw/victim.txt && cd " + esc)
	for name, target := range links {
		plant.WriteString(" && ln -sfn " + sandbox.ShellQuote(target) + " " + name)
	}
	mustRun(t, sb, plant.String())
	if err := c.GitInit(ctx, toolbox.GitInitRequest{Path: home + "/ctl"}); err != nil {
		t.Fatalf("git init of the control: %v", err)
	}
	if err := c.CreateSession(ctx, "escape"); err != nil {
		t.Fatal(err)
	}
	bulk := bulkDownloader(info.ID, sb.StateDir())

	contains := func(b []byte, err error) string {
		if err == nil && bytes.Contains(b, []byte(m.text)) {
			return "read the marker: " + string(b)
		}
		return ""
	}
	hasMarker := func(s string) bool { return strings.Contains(s, "marker.txt") }
	readRoutes := []struct {
		name string
		run  func(ctx context.Context, dir string) string
		ok   func(ctx context.Context, dir string) bool // the control on the sandbox's folder
	}{
		{"download", func(ctx context.Context, dir string) string {
			return contains(download(ctx, c, dir+"/marker.txt"))
		}, func(ctx context.Context, dir string) bool {
			b, err := download(ctx, c, dir+"/marker.txt")
			return err == nil && bytes.Contains(b, []byte("control-marker"))
		}},
		{"bulk-download", func(ctx context.Context, dir string) string {
			return contains(bulk(ctx, dir+"/marker.txt"))
		}, func(ctx context.Context, dir string) bool {
			b, err := bulk(ctx, dir+"/marker.txt")
			return err == nil && bytes.Contains(b, []byte("control-marker"))
		}},
		{"list", func(ctx context.Context, dir string) string {
			if fis, err := c.ListFiles(ctx, dir); err == nil && slices.ContainsFunc(fis, func(f toolbox.FileInfo) bool { return f.Name == "marker.txt" }) {
				return fmt.Sprintf("listed %v", fis)
			}
			return ""
		}, func(ctx context.Context, dir string) bool {
			fis, err := c.ListFiles(ctx, dir)
			return err == nil && slices.ContainsFunc(fis, func(f toolbox.FileInfo) bool { return f.Name == "marker.txt" })
		}},
		{"info", func(ctx context.Context, dir string) string {
			if fi, err := c.GetFileInfo(ctx, dir+"/marker.txt"); err == nil {
				return fmt.Sprintf("info %+v", fi)
			}
			return ""
		}, func(ctx context.Context, dir string) bool {
			_, err := c.GetFileInfo(ctx, dir+"/marker.txt")
			return err == nil
		}},
		{"find", func(ctx context.Context, dir string) string {
			if ms, err := c.FindInFiles(ctx, dir, m.text); err == nil && len(ms) > 0 {
				return fmt.Sprintf("found %v", ms)
			}
			return ""
		}, func(ctx context.Context, dir string) bool {
			ms, err := c.FindInFiles(ctx, dir, "control-marker")
			return err == nil && len(ms) > 0
		}},
		{"search", func(ctx context.Context, dir string) string {
			if got, err := c.SearchFiles(ctx, dir, "*.txt"); err == nil && slices.ContainsFunc(got, hasMarker) {
				return fmt.Sprintf("searched %v", got)
			}
			return ""
		}, func(ctx context.Context, dir string) bool {
			got, err := c.SearchFiles(ctx, dir, "*.txt")
			return err == nil && slices.ContainsFunc(got, hasMarker)
		}},
		{"git-status", func(ctx context.Context, dir string) string {
			if st, err := c.GitStatus(ctx, dir); err == nil {
				return fmt.Sprintf("git status %+v", st)
			}
			return ""
		}, func(ctx context.Context, dir string) bool {
			_, err := c.GitStatus(ctx, dir)
			return err == nil
		}},
		{"execute-cwd", func(ctx context.Context, dir string) string {
			r, err := c.Execute(ctx, toolbox.ExecuteRequest{Command: "cat marker.txt", Cwd: dir})
			if err == nil {
				return contains([]byte(r.Result), nil)
			}
			return ""
		}, func(ctx context.Context, dir string) bool {
			r, err := c.Execute(ctx, toolbox.ExecuteRequest{Command: "cat marker.txt", Cwd: dir})
			return err == nil && strings.Contains(r.Result, "control-marker")
		}},
		{"session-cd", func(ctx context.Context, dir string) string {
			r, err := c.SessionExecute(ctx, "escape", toolbox.SessionExecuteRequest{Command: "cd " + sandbox.ShellQuote(dir) + " && cat marker.txt; cd /"})
			if err == nil {
				return contains([]byte(r.Stdout+r.Stderr), nil)
			}
			return ""
		}, func(ctx context.Context, dir string) bool {
			r, err := c.SessionExecute(ctx, "escape", toolbox.SessionExecuteRequest{Command: "cd " + sandbox.ShellQuote(dir) + " && cat marker.txt; cd /"})
			return err == nil && strings.Contains(r.Stdout, "control-marker")
		}},
	}
	// The write routes act on the writable folder's victim file or add to
	// the folder; changed() tells whether they did.
	src := 0
	writeRoutes := []struct {
		name string
		run  func(ctx context.Context, dir string) error
	}{
		{"upload", func(ctx context.Context, dir string) error {
			return c.Upload(ctx, toolbox.UploadFile{Path: dir + "/uploaded.txt", Content: strings.NewReader("uploaded\n")})
		}},
		{"mkdir", func(ctx context.Context, dir string) error { return c.CreateFolder(ctx, dir+"/made", 0o755) }},
		{"move-in", func(ctx context.Context, dir string) error {
			src++
			p := home + "/src" + strconv.Itoa(src)
			if err := c.Upload(ctx, toolbox.UploadFile{Path: p, Content: strings.NewReader("moved\n")}); err != nil {
				return err
			}
			return c.Move(ctx, p, dir+"/moved.txt")
		}},
		{"move-out", func(ctx context.Context, dir string) error {
			src++
			return c.Move(ctx, dir+"/victim.txt", home+"/taken"+strconv.Itoa(src))
		}},
		{"delete", func(ctx context.Context, dir string) error { return c.Delete(ctx, dir+"/victim.txt", false) }},
		{"replace", func(ctx context.Context, dir string) error {
			_, err := c.ReplaceInFiles(ctx, []string{dir + "/victim.txt"}, "victim", "replaced")
			return err
		}},
		{"permissions", func(ctx context.Context, dir string) error {
			return c.SetFilePermissions(ctx, dir+"/victim.txt", toolbox.FilePermissions{Mode: 0o600, SetMode: true})
		}},
	}

	t.Run("control", func(t *testing.T) {
		for _, r := range readRoutes {
			if !r.ok(ctx, home+"/ctl") {
				t.Errorf("%s on the sandbox's own folder failed: the probe would prove nothing", r.name)
			}
		}
		for _, r := range writeRoutes {
			if err := r.run(ctx, home+"/ctlw"); err != nil {
				t.Errorf("%s on the sandbox's own folder: %v", r.name, err)
			}
			mustRun(t, sb, "cd ~/ctlw && rm -rf uploaded.txt made moved.txt && printf 'victim\\n' > victim.txt && chmod 666 victim.txt")
		}
	})
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range links {
			if !yield(n) {
				return
			}
		}
	})
	for _, r := range readRoutes {
		t.Run(r.name, func(t *testing.T) {
			for _, name := range names {
				if !strings.HasPrefix(name, "r-") {
					continue
				}
				t.Run(name, func(t *testing.T) {
					if leak := r.run(ctx, esc+"/"+name); leak != "" {
						t.Errorf("%s through %s -> %s: %s", r.name, name, links[name], leak)
					}
					if ch := m.changed(); ch != "" {
						t.Errorf("%s through %s: the host changed: %s", r.name, name, ch)
						m.resetWritable(t)
					}
				})
			}
		})
	}
	for _, r := range writeRoutes {
		t.Run(r.name, func(t *testing.T) {
			for _, name := range names {
				if !strings.HasPrefix(name, "w-") {
					continue
				}
				t.Run(name, func(t *testing.T) {
					err := r.run(ctx, esc+"/"+name)
					if ch := m.changed(); ch != "" {
						t.Errorf("%s through %s -> %s (%v): the host changed: %s", r.name, name, links[name], err, ch)
						m.resetWritable(t)
					}
				})
			}
		})
	}
}

// download reads the sandbox's file p through the toolbox.
func download(ctx context.Context, c *toolbox.Client, p string) ([]byte, error) {
	rc, err := c.Download(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// bulkDownloader returns a function that asks the toolbox of the sandbox
// id in stateDir for files (POST /files/bulk-download, which the client
// does not offer) and returns the answer's body.
func bulkDownloader(id, stateDir string) func(ctx context.Context, paths ...string) ([]byte, error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		sb, err := local.Open(ctx, stateDir, id)
		if err != nil {
			return nil, err
		}
		return sb.DialToolbox(ctx)
	}}}
	return func(ctx context.Context, paths ...string) ([]byte, error) {
		body, _ := json.Marshal(toolbox.FilesDownloadRequest{Paths: paths})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandbox/files/bulk-download", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("bulk download: %s: %s", resp.Status, b)
		}
		return b, err
	}
}
