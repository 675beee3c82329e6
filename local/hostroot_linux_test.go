//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// needHostRoot skips (or fails, in CI) a test of the writable root made
// of the host's folders, which needs root.
func needHostRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "needs root: a writable root is an overlay the host mounts, with ID-mapped layers")
}

// debPackage is a shell script making /tmp/hello.deb, a Debian package
// installing /usr/bin/hello-agentbox, with the host's dpkg-deb.
const debPackage = `set -e
mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/bin
printf 'Package: hello-agentbox\nVersion: 1.0\nArchitecture: all\nMaintainer: agentbox <t@example.com>\nDescription: test package\n' > /tmp/pkg/DEBIAN/control
printf '#!/bin/sh\necho hello from a package\n' > /tmp/pkg/usr/bin/hello-agentbox
chmod 755 /tmp/pkg/usr/bin/hello-agentbox
dpkg-deb --build /tmp/pkg /tmp/hello.deb >/dev/null`

// TestHostRootInstallsPackages: a sandbox made with no image installs a
// Debian package with dpkg, as its root, into its own /usr and dpkg
// database; the package survives stop and start and reaches neither the
// host nor another sandbox.
func TestHostRootInstallsPackages(t *testing.T) {
	needHostRoot(t)
	testenv.NeedFile(t, "/usr/bin/dpkg", "the host has no dpkg (Debian package dpkg)")
	ctx := context.Background()
	state := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: state})
	mustRun(t, sb, debPackage+"\ndpkg -i /tmp/hello.deb >/dev/null")
	if got := mustRun(t, sb, "hello-agentbox; dpkg-query -W -f '${Status}' hello-agentbox"); got != "hello from a package\ninstall ok installed" {
		t.Fatalf("after dpkg -i: %q", got)
	}
	if _, err := os.Stat("/usr/bin/hello-agentbox"); err == nil {
		t.Fatal("the package reached the host's /usr")
	}
	must(t, sb.Stop(ctx))
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, sb, "hello-agentbox"); got != "hello from a package\n" {
		t.Errorf("after stop and start: %q, want the package kept", got)
	}
	other := newSandbox(t, local.Options{StateDir: state, ID: "other"})
	if res := run(t, other, "command -v hello-agentbox || dpkg-query -W hello-agentbox"); res.ExitCode == 0 {
		t.Errorf("another sandbox sees the package: %q", res.Stdout)
	}
}

// TestHostRootKeepsSecrets: the writable root's /etc holds only what
// every user of the host may read: a file of the host's /etc that others
// may not read is not there, even for the sandbox's root, and the
// sandbox's writes to /etc never reach the host's.
func TestHostRootKeepsSecrets(t *testing.T) {
	needHostRoot(t)
	var secret string
	for _, p := range []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o004 == 0 {
			secret = p
			break
		}
	}
	if secret == "" {
		t.Skip("the host's /etc has no file closed to others")
	}
	sb := newSandbox(t, local.Options{StateDir: newStateDir(t)})
	if res := run(t, sb, "cat "+secret); res.ExitCode == 0 || res.Stdout != "" {
		t.Errorf("cat %s in the sandbox: exit %d, %d bytes; want it absent", secret, res.ExitCode, len(res.Stdout))
	}
	if got := mustRun(t, sb, "cat /etc/os-release"); got != hostFile(t, "/etc/os-release") {
		t.Errorf("/etc/os-release = %q, want the host's", got)
	}
	mustRun(t, sb, "echo changed > /etc/agentbox-hostroot-test")
	if _, err := os.Stat("/etc/agentbox-hostroot-test"); err == nil {
		os.Remove("/etc/agentbox-hostroot-test")
		t.Error("the sandbox's write to /etc reached the host's")
	}
	// Root of the sandbox holds Docker's set, no more: no_new_privs, and
	// no mount.
	if got := mustRun(t, sb, "grep -E '^(CapBnd|NoNewPrivs):' /proc/self/status | cut -f2"); got != dockerCapMask+"\n1\n" {
		t.Errorf("bounding set and no_new_privs: %q, want %s and 1", got, dockerCapMask)
	}
	if res := run(t, sb, "mount -t tmpfs agentbox-probe /mnt"); res.ExitCode == 0 {
		t.Error("the sandbox's root mounted a tmpfs")
	}
	// The host's /opt stays the host's, read-only, not the sandbox root's.
	if fi, err := os.Stat("/opt"); err == nil && fi.Sys().(*syscall.Stat_t).Uid == 0 {
		if res := run(t, sb, "touch /opt/agentbox-test"); res.ExitCode == 0 {
			os.Remove("/opt/agentbox-test")
			t.Error("the sandbox wrote into the host's /opt")
		}
	}
}

// TestHostRootInfo: Info and Instructions say that the root is a writable
// overlay of the host's folders, and sandboxes of one state dir share one
// base layer.
func TestHostRootInfo(t *testing.T) {
	needHostRoot(t)
	state := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: state})
	newSandbox(t, local.Options{StateDir: state, ID: "second"})
	info, err := sb.Info(context.Background())
	must(t, err)
	if got := info.Metadata["rootfs"]; !strings.Contains(got, "host's system folders") {
		t.Errorf("Info rootfs = %q", got)
	}
	if !strings.Contains(info.Identity.Capabilities, "CAP_CHOWN") {
		t.Errorf("capabilities %q, want Docker's set (package managers chown)", info.Identity.Capabilities)
	}
	if in := sb.Instructions(); !strings.Contains(in, "packages may be installed") {
		t.Errorf("Instructions do not say packages may be installed: %s", in)
	}
	if n := len(baseLayers(t, state)); n != 1 {
		t.Errorf("%d base layers for two sandboxes, want 1 shared", n)
	}
}

// baseLayers lists the base layers of host roots in the state dir.
func baseLayers(t *testing.T, state string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(state, "hostroot"))
	must(t, err)
	var dirs []string
	for _, e := range es {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// TestHostRootFollowsHostEtc: a file added to the host's /etc shows in
// the sandboxes created once the base layer last found is no longer
// fresh (its record backdated here, as time would), not in those made
// before.
func TestHostRootFollowsHostEtc(t *testing.T) {
	needHostRoot(t)
	state := newStateDir(t)
	before := newSandbox(t, local.Options{StateDir: state})
	added := fmt.Sprintf("/etc/agentbox-hostroot-%d", os.Getpid())
	must(t, os.WriteFile(added, []byte("new\n"), 0o644))
	defer os.Remove(added)
	record := filepath.Join(state, "hostroot", "current.json")
	old := time.Now().Add(-time.Hour)
	must(t, os.WriteFile(record, fmt.Appendf(nil, `{"base":%q,"checked":%q}`, baseLayers(t, state)[0], old.Format(time.RFC3339)), 0o600))
	after := newSandbox(t, local.Options{StateDir: state, ID: "after"})
	if got := mustRun(t, after, "cat "+added); got != "new\n" {
		t.Errorf("a sandbox created after the change reads %q", got)
	}
	if res := run(t, before, "cat "+added); res.ExitCode == 0 {
		t.Errorf("the sandbox created before the change sees it: %q", res.Stdout)
	}
	if n := len(baseLayers(t, state)); n != 2 {
		t.Errorf("%d base layers, want 2 (before and after the change)", n)
	}
}

// hostFile returns the content of the host file p.
func hostFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

// TestReadOnlyRootNotWithImage: ReadOnlyRoot and an image are refused
// together, before anything is made.
func TestReadOnlyRootNotWithImage(t *testing.T) {
	state := newStateDir(t)
	_, err := local.New(local.Options{StateDir: state, Config: local.Config{ReadOnlyRoot: true, Image: "python:3.12-slim"}})
	if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "ReadOnlyRoot") {
		t.Fatalf("New: %v, want ErrInvalidArgument naming ReadOnlyRoot", err)
	}
	if es, _ := os.ReadDir(state); len(es) != 0 {
		t.Errorf("the state dir holds %d entries after the refusal", len(es))
	}
}
