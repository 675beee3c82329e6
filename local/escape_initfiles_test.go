//go:build linux

package local_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// TestEscapeInitFiles names the init's own descriptors straight through
// the toolbox's file API, without any link in between: the init holds
// detached mounts of two host files (its exit record and activity stamp),
// which an upload to /proc/1/fd/N would overwrite on the host, past the
// sandbox's disk limit. The daemon refuses /proc magic links, so every
// write is refused and the host's files keep their content; a read of one
// gives the sandbox nothing of the host's. The control: the same routes on
// a file of the sandbox work.
func TestEscapeInitFiles(t *testing.T) {
	needRoot(t)
	ctx := t.Context()
	sb := newSandbox(t, local.Options{})
	c := sb.Client()
	home, err := c.UserHomeDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stamps := filepath.Join(local.Dir(sb), "toolbox")
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, f := range []string{"exit.json", "last-used"} {
			b, err := os.ReadFile(filepath.Join(stamps, f))
			if err != nil {
				t.Fatalf("the host's %s: %v", f, err)
			}
			out[f] = string(b)
		}
		return out
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(local.InitPID(sb)) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	const payload = "written-through-a-magic-link\n"

	t.Run("control", func(t *testing.T) {
		p := home + "/control.txt"
		if err := c.Upload(ctx, toolbox.UploadFile{Path: p, Content: strings.NewReader(payload)}); err != nil {
			t.Fatalf("upload to the sandbox's own file: %v", err)
		}
		b, err := download(ctx, c, p)
		if err != nil || string(b) != payload {
			t.Fatalf("download of the sandbox's own file: %q, %v", b, err)
		}
	})
	before := snapshot()
	for _, e := range ents {
		for _, form := range []string{"/proc/1/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", "/proc/1/task/1/fd/"} {
			p := form + e.Name()
			t.Run(strings.ReplaceAll(strings.TrimPrefix(p, "/proc/"), "/", "_"), func(t *testing.T) {
				if err := c.Upload(ctx, toolbox.UploadFile{Path: p, Content: strings.NewReader(payload)}); err == nil {
					t.Errorf("upload to %s was accepted", p)
				}
				if b, err := download(ctx, c, p); err == nil && len(b) > 0 {
					t.Errorf("download of %s gave %d bytes: %q", p, len(b), b[:min(len(b), 80)])
				}
				if err := c.SetFilePermissions(ctx, p, toolbox.FilePermissions{Mode: 0o777, SetMode: true}); err == nil {
					t.Errorf("chmod of %s was accepted", p)
				}
				after := snapshot()
				for f, was := range before {
					if after[f] != was || bytes.Contains([]byte(after[f]), []byte(payload)) {
						t.Errorf("through %s the host's %s changed: %q -> %q", p, f, was, after[f])
					}
				}
			})
		}
	}
}
