//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// userImage saves an image of a testRootfs with a user node (uid 1000,
// in group extra too) whose USER is user, and returns its name.
func userImage(t *testing.T, state, user string) string {
	t.Helper()
	name := "test/user-" + strings.NewReplacer(":", "-").Replace(user) + ":1"
	saveUserImage(t, state, name, user)
	return name
}

// saveUserImage saves the image of userImage as name.
func saveUserImage(t *testing.T, state, name, user string) {
	t.Helper()
	root := testRootfs(t)
	for name, content := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n",
		"etc/group":  "root:x:0:\nnode:x:1000:\nextra:x:2000:node\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(root, "home/node")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := local.SaveImage(context.Background(), state, &image.Image{
		Kind: image.KindImage, Names: []string{name}, Layers: []string{root},
		Config: image.Config{User: user},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestImageUser: the commands of a sandbox whose image has a USER run as
// that user (ids and groups from the image's passwd and group, HOME from
// passwd), not as root; the working directory, /tmp and what the toolbox
// writes (uploads) are that user's; Info says so.
func TestImageUser(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := t.TempDir()
	sb := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: userImage(t, state, "node")}})

	if got := mustRun(t, sb, "id -u; id -g; id -G; echo $HOME $USER"); got != "1000\n1000\n1000 2000\n/home/node node\n" {
		t.Errorf("ids, groups, HOME and USER: %q", got)
	}
	if got := mustRun(t, sb, "touch ./cwd ~/home /tmp/tmp && stat -c %u:%g ./cwd ~/home /tmp/tmp"); got != "1000:1000\n1000:1000\n1000:1000\n" {
		t.Errorf("files the user writes in its working directory, home and /tmp: %q", got)
	}
	if r := run(t, sb, "touch /usr/share/nope"); r.ExitCode == 0 {
		t.Error("the image's user wrote into /usr, which root owns")
	}
	if err := sb.Client().Upload(ctx, toolbox.UploadFile{Path: "up/loaded.txt", Content: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, sb, "stat -c %u:%g up up/loaded.txt && echo more >> up/loaded.txt"); got != "1000:1000\n1000:1000\n" {
		t.Errorf("an upload's owners: %q, want the user's", got)
	}
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id := info.Identity; id.User != "node" || id.UID != 1000 || id.GID != 1000 || id.Home != "/home/node" || id.Capabilities != "none" {
		t.Errorf("Info identity %+v, want node 1000:1000 /home/node with no capabilities", id)
	}
	if ins := sb.Instructions(); !strings.Contains(ins, "Commands run as the image's user node (uid 1000, gid 1000), not root; HOME=/home/node.") {
		t.Errorf("Instructions do not name the image's user: %s", ins)
	}
}

// TestImageUserNumeric: a USER of uid:gid need not be in passwd.
func TestImageUserNumeric(t *testing.T) {
	needImages(t)
	state := t.TempDir()
	sb := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: userImage(t, state, "1234:2000")}})
	if got := mustRun(t, sb, "id -u; id -g; echo $HOME"); got != "1234\n2000\n/\n" {
		t.Errorf("ids and HOME: %q, want 1234, 2000 and /", got)
	}
}

// TestImageUserUnknown: a sandbox whose image names a user its passwd
// lacks does not start, with an error that names the user.
func TestImageUserUnknown(t *testing.T) {
	needImages(t)
	state := t.TempDir()
	sb := openSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: userImage(t, state, "ghost")}})
	_, err := sb.Start(context.Background())
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("start: %v, want ErrNotFound naming the user", err)
	}
}

// TestImageBuildUser: a Dockerfile's RUN after USER runs as that user, and
// what it writes is that user's in the built image, whose sandboxes run
// as the user too.
func TestImageBuildUser(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := t.TempDir()
	saveUserImage(t, state, "test/users:1", "")
	dir := buildContext(t, "FROM test/users:1\nUSER node\nRUN id -u > /home/node/id\n")
	b, err := local.NewImageBuilder(state, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if _, err := b.Build(ctx, build.Options{ContextDir: dir, Names: []string{"test/built-user:1"}, Logs: &logs}); err != nil {
		t.Fatalf("build: %v\n%s", err, logs.String())
	}
	sb := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: "test/built-user:1"}})
	if got := mustRun(t, sb, "cat /home/node/id; stat -c %u /home/node/id; id -u"); got != "1000\n1000\n1000\n" {
		t.Errorf("the RUN step's file, its owner, and the built image's user: %q, want 1000 thrice", got)
	}
}
