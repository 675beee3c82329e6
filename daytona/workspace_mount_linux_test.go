package daytona

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/workspace"
)

// TestWorkspaceMounts: a workspace over a daytona sandbox (agentbox
// serve) with workspace.FilesystemMounts mounts its bucket when it starts
// the sandbox; Instructions and the sandbox's Info show the mount, a
// refused one with its error; the workspace's files API reads, writes,
// lists, stats and deletes objects through the mount.
func TestWorkspaceMounts(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	testenv.Need(t, local.FUSEAvailable(), "sandboxes cannot have FUSE here (needs /dev/fuse and root)")
	testenv.NeedTool(t, "s3fs", "s3fs")
	ctx := context.Background()
	s := newServe(t, &server.Knobs{})
	bucket := newBucketInSandbox(t)
	var sb *Sandbox
	sb = newEngine(t, s, Config{}, Options{ID: "ws-mounts", Hooks: sandbox.Hooks{OnStart: bucket.onStart(func() *Sandbox { return sb })}})
	// The port is known once the sandbox runs: start it, then describe the
	// bucket.
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fs := mount.S3Filesystem{Bucket: "bkt", Region: "us-east-1", AccessKeyID: "AKIDTEST", SecretAccessKey: "ws-secret-0123456789", Endpoint: bucket.url()}
	if _, err := sb.ExecuteCommand(ctx, "mkdir -p /home/daytona/busy && touch /home/daytona/busy/f", nil, nil); err != nil {
		t.Fatal(err)
	}
	mounts, err := workspace.NewFilesystemMounts(map[string]sandbox.Filesystem{"/home/daytona/data": fs, "/home/daytona/busy": fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.NewFilesystemMounts(map[string]sandbox.Filesystem{"../x": fs}); err == nil {
		t.Error("a relative mount path: no error")
	}
	ws, err := workspace.New(workspace.Config{Sandbox: sb, Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Start(ctx); err != nil {
		t.Fatal(err)
	}
	instr := ws.Instructions()
	if !strings.Contains(instr, "Mounted filesystems: "+fs.String()+" at /home/daytona/data.") || !strings.Contains(instr, "Not mounted: "+fs.String()+" at /home/daytona/busy (error: ") || !strings.Contains(instr, "not empty") || strings.Contains(instr, fs.SecretAccessKey) {
		t.Errorf("Instructions: %s", instr)
	}
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]sandbox.MountState{}
	for _, m := range info.Mounts {
		states[m.Path] = m.State
	}
	if states["/home/daytona/data"] != sandbox.MountMounted || states["/home/daytona/busy"] != sandbox.MountError {
		t.Errorf("Info.Mounts: %+v", info.Mounts)
	}

	// The files API through the mount.
	if b, err := ws.ReadFile(ctx, "/home/daytona/data/hello.txt"); err != nil || string(b) != "hello from the bucket\n" {
		t.Errorf("ReadFile: %q, %v", b, err)
	}
	if err := ws.WriteFile(ctx, "/home/daytona/data/notes/a.txt", []byte("written by the workspace")); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.ExecuteCommand(ctx, "sync /home/daytona/data/notes/a.txt", nil, nil); err != nil {
		t.Fatal(err)
	}
	if obj, err := bucket.be.GetObject("bkt", "notes/a.txt", nil); err != nil {
		t.Errorf("notes/a.txt is not in the bucket: %v", err)
	} else {
		obj.Contents.Close()
	}
	list, err := ws.ReadDir(ctx, "/home/daytona/data")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list {
		names = append(names, f.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "hello.txt") || !strings.Contains(strings.Join(names, ","), "notes") {
		t.Errorf("ReadDir: %v", names)
	}
	if st, err := ws.Stat(ctx, "/home/daytona/data/hello.txt"); err != nil || st.Size != 22 {
		t.Errorf("Stat: %+v, %v", st, err)
	}
	if err := ws.Remove(ctx, "/home/daytona/data/notes/a.txt", false); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.be.GetObject("bkt", "notes/a.txt", nil); err == nil {
		t.Error("notes/a.txt is still in the bucket after Remove")
	}
	for _, p := range []string{"/home/daytona/data", "/home/daytona/busy"} {
		if err := sb.Unmount(ctx, p); err != nil {
			t.Errorf("unmount %s: %v", p, err)
		}
	}
}
