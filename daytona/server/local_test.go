package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// needRoot needs the test to run as root (see testenv.NeedRoot): the local
// engine's default network needs it.
func needRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "needs root: the local engine's default network and limits")
}

// newLocalStateDir returns a state dir whose sandboxes are all removed
// when the test ends.
func newLocalStateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		localtest.CheckNoneLeft(t, dir)
	})
	return dir
}

// exec runs command through the toolbox client c and returns its output,
// failing the test unless it exits 0.
func exec(t *testing.T, c *toolbox.Client, command string) string {
	t.Helper()
	res, err := c.Execute(context.Background(), toolbox.ExecuteRequest{Command: command})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d: %s", command, res.ExitCode, res.Result)
	}
	return res.Result
}

func TestLocalEngine(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{})
	var vol volumeDTO
	if st := h.call("POST", "/volumes", map[string]string{"name": "shared"}, &vol); st != http.StatusOK {
		t.Fatalf("create volume: %d", st)
	}
	sb := h.create(map[string]any{"name": "real", "env": map[string]string{"GREETING": "hello"}, "labels": map[string]string{"code-toolbox-language": "python"},
		"volumes": []map[string]string{{"volumeId": vol.ID, "mountPath": "/data"}}})
	got := h.waitState(sb.ID, stateStarted)
	if got.CPU <= 0 || got.Memory <= 0 || got.Disk <= 0 {
		t.Errorf("sizes of a started sandbox: cpu %v memory %v disk %v, want the limits in force", got.CPU, got.Memory, got.Disk)
	}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(when string) {
		t.Helper()
		// The user shows in USER, id -un and the home; commands run as
		// uid 0 of the sandbox's user namespace, named daytona.
		out := exec(t, c, `echo "$USER $(id -un) $HOME $PWD $GREETING"`)
		if want := "daytona daytona /home/daytona /home/daytona hello\n"; out != want {
			t.Fatalf("%s: user, home, work dir and env = %q, want %q", when, out, want)
		}
	}
	check("after create")
	exec(t, c, "echo kept > ~/kept.txt; echo shared > /data/file")
	if data, err := os.ReadFile(filepath.Join(dir, "volumes", vol.ID, "file")); err != nil || string(data) != "shared\n" {
		t.Fatalf("the volume's file on the host: %q %v", data, err)
	}

	// A preview URL reaches a server in the sandbox.
	ctx := context.Background()
	if err := c.CreateSession(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SessionExecute(ctx, "web", toolbox.SessionExecuteRequest{
		Command: "mkdir -p /tmp/site && echo previewed > /tmp/site/index.html && exec python3 -m http.server 8080 --bind 0.0.0.0 --directory /tmp/site", RunAsync: true,
	}); err != nil {
		t.Fatal(err)
	}
	var link portPreviewURL
	if st := h.call("GET", "/sandbox/real/ports/8080/preview-url", nil, &link); st != http.StatusOK {
		t.Fatalf("preview-url: %d", st)
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", h.url+"/", nil)
		req.Host = u.Host
		req.Header.Set(previewTokenHeader, link.Token)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			if string(body) != "previewed\n" {
				t.Fatalf("preview served %q", body)
			}
			// Nothing was published on the host for it.
			if info, err := localtest.Lookup(ctx, dir, sb.ID); err != nil || len(info.Network.Ports) != 0 {
				t.Fatalf("host ports published by a preview: %+v %v, want none", info.Network.Ports, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("preview: %d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	h.call("POST", "/sandbox/real/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	if info, err := localtest.Lookup(context.Background(), dir, sb.ID); err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("local engine after stop: %v %v", info, err)
	}
	h.call("POST", "/sandbox/real/start", nil, nil)
	h.waitState(sb.ID, stateStarted)
	check("after a restart")
	if out := exec(t, c, "cat ~/kept.txt"); out != "kept\n" {
		t.Fatalf("file after a restart: %q", out)
	}

	h.call("DELETE", "/sandbox/real", nil, nil)
	h.waitState(sb.ID, "gone")
	if _, err := localtest.Lookup(context.Background(), dir, sb.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("local engine after delete: %v, want not found", err)
	}
	if _, err := c.Version(context.Background()); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("toolbox of a deleted sandbox: %v", err)
	}
	if st := h.call("DELETE", "/volumes/"+vol.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("delete volume: %d", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", vol.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted volume's folder: %v", err)
	}
}

// A create with a snapshot of the local engine's image store makes the
// sandbox's root of it; an unknown one is refused before anything exists.
func TestLocalSnapshot(t *testing.T) {
	dir, _ := localStoreWith(t, "team/tools:1")
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{published: []string{"team/tools:1"}})
	var e apiError
	if code := h.call("POST", "/sandbox", map[string]any{"snapshot": "team/nope:1"}, &e); code != http.StatusBadRequest || !strings.Contains(e.Message, "team/nope:1 not found") {
		t.Fatalf("create with an unknown snapshot: %d %+v", code, e)
	}
	sb := h.create(map[string]any{"name": "from-snapshot", "snapshot": "team/tools:1"})
	if got := h.waitState(sb.ID, stateStarted); got.Snapshot != "team/tools:1" {
		t.Errorf("the sandbox's snapshot: %q", got.Snapshot)
	}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out := exec(t, c, "cat /etc/os-release"); out != testrootfs.OSRelease {
		t.Errorf("/etc/os-release in a sandbox of the snapshot: %q", out)
	}
	h.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
	h.waitState(sb.ID, "gone")
}
