package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/s3test"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestMountLocal: agentbox mount with credentials from a file, the bucket
// in the sandbox, sandbox info listing it, agentbox unmount.
func TestMountLocal(t *testing.T) {
	testenv.NeedRoot(t, "needs root: a bucket mount is a FUSE mount")
	testenv.NeedTool(t, "s3fs", "s3fs")
	srv := s3test.Start(t, "data")
	e := newEnv(t)
	e.must("exec", "--", "true")
	creds := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(creds, []byte(srv.AccessKeyID+":"+srv.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.must("mount", cli.DefaultID, "s3://data/team", "/tmp/bucket", "--endpoint", srv.URL, "--credentials-file", creds)
	if !strings.Contains(r.stdout, "mounted s3://data/team") {
		t.Errorf("mount said %q", r.stdout)
	}
	e.must("exec", "--", "echo hi > /tmp/bucket/f")
	if got := e.must("exec", "--", "cat /tmp/bucket/f").stdout; got != "hi\n" {
		t.Fatalf("read back %q", got)
	}
	info := e.must("sandbox", "info", cli.DefaultID).stdout
	if !strings.Contains(info, "/tmp/bucket (s3://data/team") || !strings.Contains(info, "mounted") || strings.Contains(info, srv.SecretAccessKey) {
		t.Errorf("sandbox info: %s", info)
	}
	if r := e.run("", "mount", cli.DefaultID, "s3://data", "/proc/x", "--endpoint", srv.URL, "--credentials-file", creds); r.code == 0 || !strings.Contains(r.stderr, "/proc") {
		t.Errorf("mount at /proc/x: exit %d, %q", r.code, r.stderr)
	}
	if r := e.run("", "mount", "nope", "s3://data", "/tmp/b", "--endpoint", srv.URL, "--credentials-file", creds); r.code == 0 || !strings.Contains(r.stderr, "no sandbox") {
		t.Errorf("mount in a missing sandbox: exit %d, %q", r.code, r.stderr)
	}
	e.must("unmount", cli.DefaultID, "/tmp/bucket")
	if got := e.must("exec", "--", "ls -A /tmp/bucket").stdout; got != "" {
		t.Fatalf("after unmount: %q", got)
	}
	if r := e.run("", "unmount", cli.DefaultID, "/tmp/bucket"); r.code == 0 || !strings.Contains(r.stderr, "nothing is mounted") {
		t.Errorf("unmount again: exit %d, %q", r.code, r.stderr)
	}
}
