package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// stoppedMeta is the metadata of a stopped sandbox as a root host writes
// it (taken from one), its id ID.
const stoppedMeta = `{
  "id": "ID",
  "createdAt": "2026-12-02T15:55:17.890132106Z",
  "status": "stopped",
  "stoppedAt": "2026-12-02T15:55:26.812620689Z",
  "lastUsedAt": "2026-12-02T15:55:21.074812516Z",
  "options": {
    "user": "agent",
    "language": "shell",
    "workingDirectory": "/home/agent",
    "autoStopInterval": 900000000000,
    "network": {
      "mode": "public"
    }
  },
  "hostIds": {
    "first": 2062221312,
    "count": 65536
  },
  "limits": {
    "cpu": 1,
    "memoryMB": 6026,
    "pids": 1024,
    "diskMB": 4096,
    "cgroup": 1
  },
  "root": {
    "host": true,
    "overlays": [
      "/usr",
      "/var/lib/dpkg"
    ],
    "image": "",
    "layers": [
      "/state/hostroot/2ba58ef897c20048790ff684"
    ],
    "config": {}
  }
}
`

// BenchmarkList200 lists a state dir of 200 stopped sandboxes (their
// folders as a stop leaves them: metadata, exit record, activity stamp)
// with List and with ListSummaries, in one run: what 'agentbox sandbox
// ls' costs beyond the CLI's start-up, before and after.
func BenchmarkList200(b *testing.B) {
	stateDir := b.TempDir()
	for i := range 200 {
		id := fmt.Sprintf("ls-%03d", i)
		dir := filepath.Join(stateDir, "sandboxes", id)
		if err := os.MkdirAll(filepath.Join(dir, "toolbox"), 0o700); err != nil {
			b.Fatal(err)
		}
		for name, text := range map[string]string{
			"meta.json":         strings.Replace(stoppedMeta, `"ID"`, `"`+id+`"`, 1),
			"toolbox/exit.json": `{"stoppedAt":"2026-12-02T15:55:26.8Z","reason":"stopped"}`,
			"toolbox/last-used": "",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, bc := range []struct {
		name string
		list func(context.Context, string) ([]sandbox.Info, error)
	}{{"List", local.List}, {"ListSummaries", local.ListSummaries}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				infos, err := bc.list(context.Background(), stateDir)
				if err != nil || len(infos) != 200 {
					b.Fatalf("%d sandboxes, %v", len(infos), err)
				}
			}
		})
	}
}
