package daytona

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// Bucket mounts, as Mastra's DaytonaSandbox makes them (reference §5.3 to
// §5.5): the FUSE tool (s3fs, gcsfuse) runs inside the remote sandbox,
// installed with apt when missing; its credential files go to a private
// folder (0700, files 0600) removed when the mount ends (at once, for
// files the tool reads only at start); a marker "path|config hash" in
// markerDir (Mastra's own folder and names, so either recognises the
// other's mounts) makes a repeated mount with the same configuration a
// no-op and a changed one a remount; mounts nobody recorded, and folders
// that are not empty, are refused. Connecting to a running sandbox
// adopts the mounts its markers describe; every start (a revival
// included) mounts again what this handle mounted.

// markerDir holds the markers of the mounts in the remote sandbox.
const markerDir = "/tmp/.mastra-mounts"

// credDirPrefix starts the names of the mounts' credential folders.
const credDirPrefix = "/tmp/.agentbox-mount-"

// mountTimeout bounds each command of a mount, in seconds (Mastra's 60 s
// for the tool; apt gets more).
const (
	mountTimeout   = 60
	installTimeout = 300
)

// mountEntry is one mount of the sandbox.
type mountEntry struct {
	fs   sandbox.Filesystem // nil for a mount adopted from a marker
	info sandbox.MountInfo
	hash string
}

// mountTable is the sandbox's mounts, in the order they were made.
type mountTable struct {
	ops     sync.Mutex // serializes mount operations
	mu      sync.Mutex // guards entries
	entries []*mountEntry
}

func (t *mountTable) get(p string) *mountEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if e.info.Path == p {
			return e
		}
	}
	return nil
}

// set records e, replacing the entry at its path.
func (t *mountTable) set(e *mountEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, old := range t.entries {
		if old.info.Path == e.info.Path {
			t.entries[i] = e
			return
		}
	}
	t.entries = append(t.entries, e)
}

func (t *mountTable) remove(p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, e := range t.entries {
		if e.info.Path == p {
			t.entries = append(t.entries[:i], t.entries[i+1:]...)
			return
		}
	}
}

// setState sets the state and error of e, and records e.
func (t *mountTable) setState(e *mountEntry, st sandbox.MountState, msg string) {
	t.mu.Lock()
	e.info.State, e.info.Error = st, msg
	t.mu.Unlock()
	t.set(e)
}

// stopped marks the mounts pending: the sandbox stopped, their FUSE
// servers ended; the next start mounts them again. Adopted mounts, which
// this handle cannot mount again, are forgotten.
func (t *mountTable) stopped() {
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.entries[:0]
	for _, e := range t.entries {
		if e.fs != nil {
			e.info.State, e.info.Error = sandbox.MountPending, ""
			kept = append(kept, e)
		}
	}
	t.entries = kept
}

// clear forgets every mount (the sandbox is destroyed).
func (t *mountTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = nil
}

func (t *mountTable) list() []sandbox.MountInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]sandbox.MountInfo, len(t.entries))
	for i, e := range t.entries {
		out[i] = e.info
	}
	return out
}

var _ sandbox.Mounter = (*Sandbox)(nil)

// Mount mounts fs (a mount.S3Filesystem or mount.GCSFilesystem) at path
// inside the sandbox with its FUSE tool (see sandbox.Mounter). On a
// sandbox not started yet the mount is recorded (state pending) and made
// at the next start. Failures are *sandbox.MountFailure errors, without
// credentials.
func (s *Sandbox) Mount(ctx context.Context, fs sandbox.Filesystem, p string) error {
	fail := func(err error) error {
		return &sandbox.MountFailure{Op: "mount", Path: p, Filesystem: fs.String(), Err: err}
	}
	if err := mount.ValidatePath(p); err != nil {
		return fail(err)
	}
	if _, err := mount.NewPlan(fs, mount.PlanOptions{MountPoint: p, CredentialDir: credDirPrefix + "x"}); err != nil {
		return fail(err)
	}
	s.mounts.ops.Lock()
	defer s.mounts.ops.Unlock()
	e := &mountEntry{fs: fs, info: sandbox.MountInfo{Path: p, Filesystem: fs.String(), Kind: fs.Kind(), ReadOnly: readOnly(fs), State: sandbox.MountPending}, hash: mount.ConfigHash(fs)}
	s.mounts.set(e)
	if s.attached() == nil {
		return nil
	}
	if err := s.mountOne(ctx, e); err != nil {
		return fail(err)
	}
	return nil
}

// readOnly reports whether fs mounts read-only.
func readOnly(fs sandbox.Filesystem) bool {
	switch f := fs.(type) {
	case mount.S3Filesystem:
		return f.ReadOnly
	case *mount.S3Filesystem:
		return f.ReadOnly
	case mount.GCSFilesystem:
		return f.ReadOnly
	case *mount.GCSFilesystem:
		return f.ReadOnly
	}
	return false
}

// Mounts lists the sandbox's mounts and their states.
func (s *Sandbox) Mounts(context.Context) ([]sandbox.MountInfo, error) {
	return s.mounts.list(), nil
}

// Unmount ends the mount at path, removes its credential files, marker
// and (empty) folder. It fails with an error matching sandbox.ErrNotFound
// when neither this handle nor a marker knows a mount there.
func (s *Sandbox) Unmount(ctx context.Context, p string) error {
	fail := func(err error) error { return &sandbox.MountFailure{Op: "unmount", Path: p, Err: err} }
	if err := mount.ValidatePath(p); err != nil {
		return fail(err)
	}
	s.mounts.ops.Lock()
	defer s.mounts.ops.Unlock()
	known := s.mounts.get(p) != nil
	if s.attached() == nil {
		if !known {
			return fail(fmt.Errorf("%w: nothing is mounted at %s", sandbox.ErrNotFound, p))
		}
		s.mounts.remove(p)
		return nil
	}
	if !known {
		out, err := s.sh(ctx, "cat "+sandbox.ShellQuote(markerPath(p))+" 2>/dev/null", mountTimeout)
		if err != nil {
			return fail(err)
		}
		if mp, _, ok := mount.ParseMarker(strings.TrimSpace(out.Result)); !ok || mp != p {
			return fail(fmt.Errorf("%w: nothing is mounted at %s", sandbox.ErrNotFound, p))
		}
	}
	if err := s.unmountRemote(ctx, p); err != nil {
		return fail(err)
	}
	s.mounts.remove(p)
	return nil
}

// markerPath returns the path of the marker of the mount at p.
func markerPath(p string) string { return path.Join(markerDir, mount.MarkerName(p)) }

// credDirGlob returns the shell pattern of the credential folders of the
// mounts at p.
func credDirGlob(p string) string {
	h := sha256.Sum256([]byte(p))
	return credDirPrefix + hex.EncodeToString(h[:8]) + "-"
}

// sh runs script with sh in the sandbox through the toolbox (not the
// lifecycle: it runs while the sandbox starts) and returns its merged
// output.
func (s *Sandbox) sh(ctx context.Context, script string, timeout int) (*toolbox.ExecuteResponse, error) {
	return s.tb.Execute(ctx, toolbox.ExecuteRequest{Command: "sh -c " + sandbox.ShellQuote(script), Timeout: timeout})
}

// sudoPrefix runs a command as root: directly when the sandbox's user is
// root, else with sudo (Daytona's user has it without a password).
const sudoPrefix = `if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; `

// mountOne mounts e in the attached sandbox and records the outcome in
// e's state.
func (s *Sandbox) mountOne(ctx context.Context, e *mountEntry) error {
	err := s.mountRemote(ctx, e)
	switch {
	case err == nil:
		s.mounts.setState(e, sandbox.MountMounted, "")
	case errors.Is(err, mount.ErrToolNotFound):
		s.mounts.setState(e, sandbox.MountUnavailable, err.Error())
	default:
		s.mounts.setState(e, sandbox.MountError, err.Error())
	}
	return err
}

// mountRemote is Mastra's mount sequence for e (§5.3).
func (s *Sandbox) mountRemote(ctx context.Context, e *mountEntry) error {
	p := e.info.Path
	q := sandbox.ShellQuote(p)
	// Already mounted: ours with this configuration (keep), ours with
	// another (remount), or someone else's (refuse).
	out, err := s.sh(ctx, "if mountpoint -q "+q+" 2>/dev/null; then echo mounted; cat "+sandbox.ShellQuote(markerPath(p))+" 2>/dev/null; else echo free; fi", mountTimeout)
	if err != nil {
		return err
	}
	lines := strings.SplitN(strings.TrimSpace(out.Result), "\n", 2)
	if lines[0] == "mounted" {
		var mp, hash string
		ok := false
		if len(lines) == 2 {
			mp, hash, ok = mount.ParseMarker(strings.TrimSpace(lines[1]))
		}
		switch {
		case !ok || mp != p:
			return fmt.Errorf("%s is already mounted by an unmanaged source", p)
		case hash == e.hash:
			return nil
		}
		if err := s.unmountRemote(ctx, p); err != nil {
			return fmt.Errorf("replace the mount of another configuration: %w", err)
		}
	}
	s.mounts.setState(e, sandbox.MountMounting, "")
	out, err = s.sh(ctx, "if [ -d "+q+" ] && [ -n \"$(ls -A "+q+" 2>/dev/null)\" ]; then echo non-empty; fi; "+
		sudoPrefix+"mkdir -p "+q+" 2>/dev/null || { $SUDO mkdir -p "+q+" && $SUDO chown \"$(id -u):$(id -g)\" "+q+"; }", mountTimeout)
	if err != nil {
		return err
	}
	if strings.Contains(out.Result, "non-empty") {
		return fmt.Errorf("cannot mount at %s: the folder exists and is not empty; mounting would hide its files: use another path or empty the folder first", p)
	}
	if out.ExitCode != 0 {
		return fmt.Errorf("cannot make the folder %s: %s", p, strings.TrimSpace(out.Result))
	}
	ids, err := s.sh(ctx, "id -u; id -g", mountTimeout)
	if err != nil {
		return err
	}
	var owner *mount.Owner
	var uid, gid int
	if n, _ := fmt.Sscan(ids.Result, &uid, &gid); n == 2 {
		owner = &mount.Owner{UID: uid, GID: gid}
	}
	credDir := credDirGlob(p) + rand.Text()[:12]
	plan, err := mount.NewPlan(e.fs, mount.PlanOptions{MountPoint: p, CredentialDir: credDir, Owner: owner, AllowOther: uid == 0})
	if err != nil {
		return err
	}
	if err := s.installTool(ctx, plan.Tool); err != nil {
		return err
	}
	if uid != 0 {
		// As Mastra does for Daytona's user: /dev/fuse open to it (best
		// effort; fusermount3, setuid, mounts for it).
		_, _ = s.sh(ctx, sudoPrefix+"$SUDO chmod a+rw /dev/fuse 2>/dev/null; true", mountTimeout)
	}
	if len(plan.Files) > 0 {
		if err := s.writeCredentials(ctx, credDir, plan); err != nil {
			return err
		}
	}
	cmd := plan.ShellCommand()
	if env := s.mountEnv(plan); len(env) > 0 {
		cmd = "env " + quoteAll(env) + " " + cmd
	}
	out, err = s.sh(ctx, cmd+" 2>&1", mountTimeout)
	if err == nil && out.ExitCode != 0 {
		err = fmt.Errorf("%s failed (exit %d): %s", plan.Tool, out.ExitCode, plan.Redact(strings.TrimSpace(out.Result)))
	}
	if err == nil {
		// Readable without listing (Mastra's probe).
		out, err = s.sh(ctx, "timeout -k 5s 15s stat -L -- "+q+" > /dev/null 2>&1 && mountpoint -q "+q, 30)
		if err == nil && out.ExitCode != 0 {
			err = fmt.Errorf("the %s mount at %s is not usable (exit %d)", plan.Tool, p, out.ExitCode)
		}
	}
	if err != nil {
		// Leave nothing behind: a half-made mount, the credentials.
		_ = s.unmountRemote(ctx, p)
		return err
	}
	var transient []string
	for _, f := range plan.Files {
		if f.Transient {
			transient = append(transient, sandbox.ShellQuote(f.Path))
		}
	}
	if len(transient) > 0 {
		_, _ = s.sh(ctx, "rm -f "+strings.Join(transient, " "), mountTimeout)
	}
	desc, _ := json.Marshal(sandbox.MountInfo{Path: p, Filesystem: e.info.Filesystem, Kind: e.info.Kind, ReadOnly: e.info.ReadOnly})
	return s.tb.Upload(ctx,
		toolbox.UploadFile{Path: markerPath(p), Content: strings.NewReader(mount.Marker(p, e.hash))},
		toolbox.UploadFile{Path: markerPath(p) + ".json", Content: strings.NewReader(string(desc))})
}

// mountEnv is the environment added to plan's tool: Options.MountEnv
// (sorted by name), then the plan's own variables, which win.
func (s *Sandbox) mountEnv(plan *mount.Plan) []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(s.opts.MountEnv)) {
		env = append(env, k+"="+s.opts.MountEnv[k])
	}
	return append(env, plan.Env...)
}

// quoteAll shell-quotes each of args, joined by spaces.
func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = sandbox.ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// writeCredentials writes the plan's credential files in the private
// folder dir: made 0700 first, each file made 0600 before the secret is
// written into it.
func (s *Sandbox) writeCredentials(ctx context.Context, dir string, plan *mount.Plan) error {
	var touch []string
	for _, f := range plan.Files {
		touch = append(touch, sandbox.ShellQuote(f.Path))
	}
	out, err := s.sh(ctx, "umask 077 && mkdir -m 700 "+sandbox.ShellQuote(dir)+" && touch "+strings.Join(touch, " ")+" && chmod 600 "+strings.Join(touch, " "), mountTimeout)
	if err != nil {
		return err
	}
	if out.ExitCode != 0 {
		return fmt.Errorf("cannot make the private credential folder: %s", strings.TrimSpace(out.Result))
	}
	files := make([]toolbox.UploadFile, len(plan.Files))
	for i, f := range plan.Files {
		files[i] = toolbox.UploadFile{Path: f.Path, Content: strings.NewReader(string(f.Content))}
	}
	if err := s.tb.Upload(ctx, files...); err != nil {
		_, _ = s.sh(ctx, "rm -rf "+sandbox.ShellQuote(dir), mountTimeout)
		return fmt.Errorf("write the credential files: %s", plan.Redact(err.Error()))
	}
	// A toolbox that replaces files on upload made them anew: 0600 again.
	out, err = s.sh(ctx, "chmod 600 "+strings.Join(touch, " "), mountTimeout)
	if err == nil && out.ExitCode != 0 {
		err = fmt.Errorf("cannot make the credential files private: %s", strings.TrimSpace(out.Result))
	}
	if err != nil {
		_, _ = s.sh(ctx, "rm -rf "+sandbox.ShellQuote(dir), mountTimeout)
		return err
	}
	return nil
}

// installTool installs tool with apt when the sandbox lacks it.
func (s *Sandbox) installTool(ctx context.Context, tool string) error {
	out, err := s.sh(ctx, "command -v "+tool, mountTimeout)
	if err != nil {
		return err
	}
	if out.ExitCode == 0 {
		return nil
	}
	pkg := tool
	hint := ""
	if tool == mount.ToolGCSFuse {
		hint = " (gcsfuse comes from Google's apt repository packages.cloud.google.com/apt, which the image must list)"
	}
	out, err = s.sh(ctx, "command -v apt-get >/dev/null || { echo no-apt; exit 1; }; "+sudoPrefix+
		"$SUDO apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "+pkg+" >/dev/null 2>&1; command -v "+tool, installTimeout)
	if err != nil {
		return err
	}
	if out.ExitCode != 0 {
		if strings.Contains(out.Result, "no-apt") {
			return fmt.Errorf("%w: %s is not installed in the sandbox and apt-get is not available to install it: use an image with %s", mount.ErrToolNotFound, tool, tool)
		}
		return fmt.Errorf("%w: %s is not installed in the sandbox and apt-get install %s failed%s", mount.ErrToolNotFound, tool, pkg, hint)
	}
	return nil
}

// unmountRemote ends the mount at p (a dead FUSE server's too), waits (2 s
// at most) for its FUSE server, which exits once unmounted, to be gone,
// then removes its credential folders, marker and folder.
func (s *Sandbox) unmountRemote(ctx context.Context, p string) error {
	q := sandbox.ShellQuote(p)
	script := sudoPrefix +
		"fusermount3 -u " + q + " 2>/dev/null || fusermount -u " + q + " 2>/dev/null || $SUDO umount " + q + " 2>/dev/null || $SUDO umount -l " + q + " 2>/dev/null; " +
		"if mountpoint -q " + q + " 2>/dev/null; then echo still-mounted; exit 1; fi; " +
		"i=0; while [ $i -lt 40 ] && pgrep -f -- " + sandbox.ShellQuote(fuseServerPattern(p)) + " >/dev/null 2>&1; do sleep 0.05; i=$((i+1)); done; " +
		"rm -rf " + credDirGlob(p) + "*; " +
		"rm -f " + sandbox.ShellQuote(markerPath(p)) + " " + sandbox.ShellQuote(markerPath(p)+".json") + "; " +
		"rmdir " + q + " 2>/dev/null || $SUDO rmdir " + q + " 2>/dev/null; true"
	out, err := s.sh(ctx, script, mountTimeout)
	if err != nil {
		return err
	}
	if out.ExitCode != 0 {
		return fmt.Errorf("%s is still mounted", p)
	}
	return nil
}

// fuseServerPattern matches (pgrep -f) the command line of the FUSE server
// of the mount at p, and not the shell that runs pgrep.
func fuseServerPattern(p string) string {
	return "^([^ ]*/)?(s3fs|gcsfuse) (.* )?" + regexp.QuoteMeta(p) + "( |$)"
}

// restoreMounts runs once the sandbox is attached (at every start, a
// revival's included): it adopts the mounts the remote sandbox's markers
// describe that this handle does not know (a reconnect), then mounts
// what this handle recorded, keeping mounts already in place with the
// same configuration. Failures are recorded in the mounts' states, never
// fail the start.
func (s *Sandbox) restoreMounts(ctx context.Context) {
	s.mounts.ops.Lock()
	defer s.mounts.ops.Unlock()
	s.adoptMarkers(ctx)
	s.mounts.mu.Lock()
	entries := append([]*mountEntry(nil), s.mounts.entries...)
	s.mounts.mu.Unlock()
	for _, e := range entries {
		if e.fs == nil {
			continue // adopted: nothing to mount it again with
		}
		if err := s.mountOne(ctx, e); err != nil {
			s.opts.Logf("daytona: mount %s at %s: %v", e.info.Filesystem, e.info.Path, err)
		}
	}
}

// adoptMarkers records the mounts in place that markers describe, and
// removes markers whose mount is gone.
func (s *Sandbox) adoptMarkers(ctx context.Context) {
	out, err := s.sh(ctx, "cd "+markerDir+" 2>/dev/null || exit 0; for m in mount-*; do case $m in *.json) continue;; esac; [ -f \"$m\" ] || continue; "+
		"echo \"@$(cat \"$m\")\"; cat \"$m.json\" 2>/dev/null; echo; done", mountTimeout)
	if err != nil || out.ExitCode != 0 {
		return
	}
	var stale []string
	lines := strings.Split(out.Result, "\n")
	for i := 0; i < len(lines); i++ {
		l, ok := strings.CutPrefix(lines[i], "@")
		if !ok {
			continue
		}
		p, hash, ok := mount.ParseMarker(strings.TrimSpace(l))
		if !ok || mount.ValidatePath(p) != nil {
			continue
		}
		var info sandbox.MountInfo
		if i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "@") {
			_ = json.Unmarshal([]byte(lines[i+1]), &info)
		}
		if s.mounts.get(p) != nil {
			continue
		}
		mo, err := s.sh(ctx, "mountpoint -q "+sandbox.ShellQuote(p), mountTimeout)
		if err != nil {
			continue
		}
		if mo.ExitCode != 0 {
			stale = append(stale, sandbox.ShellQuote(markerPath(p)), sandbox.ShellQuote(markerPath(p)+".json"))
			continue
		}
		info.Path, info.State, info.Error = p, sandbox.MountMounted, ""
		s.mounts.set(&mountEntry{info: info, hash: hash})
	}
	if len(stale) > 0 {
		_, _ = s.sh(ctx, "rm -f "+strings.Join(stale, " "), mountTimeout)
	}
}
