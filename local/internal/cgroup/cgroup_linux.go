package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/cgroupfile"
	"github.com/agentbox-dev/agentbox/internal/mountinfo"

	"github.com/agentbox-dev/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// Parent names the folder, in each hierarchy, that holds the
// sandboxes' cgroups.
const Parent = "agentbox"

// cfsPeriod is the CFS period of a sandbox's CPU quota, in microseconds.
const cfsPeriod = 100000

// Key names the cgroups of a sandbox, unique per state dir: an FNV-1a
// hash of the state dir, then the id.
func Key(stateDir, id string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(stateDir); i++ {
		h = (h ^ uint32(stateDir[i])) * 16777619
	}
	return fmt.Sprintf("%08x-%s", h, id)
}

// mount is a mounted cgroup hierarchy.
type mount struct {
	dir         string
	v2          bool
	controllers []string // v1: the controllers we use that it offers
}

// usedV1Controller reports whether a sandbox uses the v1 controller c:
// those of the limits, cpuacct for CPU accounting and the freezer for
// pauses (freezer_linux.go).
func usedV1Controller(c string) bool {
	return c == "memory" || c == "pids" || c == "cpu" || c == "cpuacct" || c == "freezer"
}

// cgroupMounts lists the cgroup2 hierarchy and the v1 hierarchies offering
// a controller we use.
func cgroupMounts() ([]mount, error) {
	mounts, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return nil, err
	}
	var out []mount
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			out = append(out, mount{dir: m.MountPoint, v2: true})
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(m.SuperOptions, ",") {
				if usedV1Controller(o) {
					ctrls = append(ctrls, o)
				}
			}
			if len(ctrls) > 0 {
				out = append(out, mount{dir: m.MountPoint, controllers: ctrls})
			}
		}
	}
	return out, nil
}

// ownCgroups maps v1 controller names (and "" for v2) to this process's
// cgroup path.
func ownCgroups() map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			m[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m
}

// Host is what cgroups this host offers sandboxes.
type Host struct {
	// Version is the cgroup version sandboxes get: 1, 2, or 0 (none, Why
	// says why).
	Version int
	// Controllers are the limit controllers offered: of "cpu", "memory"
	// and "pids", those the hierarchies have.
	Controllers []string
	// Why says why there are no cgroups (Version 0).
	Why string
	v1  []mount
	v2  *mount
}

// Has reports whether h offers the controller c ("cpu", "memory",
// "pids").
func (h Host) Has(c string) bool { return slices.Contains(h.Controllers, c) }

// Probe finds the cgroups sandboxes get: v1 ones when the host mounts any
// v1 hierarchy a sandbox uses (a hybrid host accounts there), else v2
// ones. Only root may create them.
func Probe() Host {
	if os.Geteuid() != 0 {
		return Host{Why: "cgroups need root (this engine runs as uid " + strconv.Itoa(os.Geteuid()) + ")"}
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return Host{Why: "cannot read the mount table: " + err.Error()}
	}
	var h Host
	for i, m := range mounts {
		if m.v2 {
			h.v2 = &mounts[i]
		} else {
			h.v1 = append(h.v1, m)
		}
	}
	var ctrls []string
	switch {
	case len(h.v1) > 0:
		h.Version = 1
		for _, m := range h.v1 {
			ctrls = append(ctrls, m.controllers...)
		}
	case h.v2 != nil:
		h.Version = 2
		b, _ := os.ReadFile(filepath.Join(h.v2.dir, "cgroup.controllers"))
		ctrls = strings.Fields(string(b))
	default:
		return Host{Why: "no cgroup hierarchy is mounted"}
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		if slices.Contains(ctrls, c) {
			h.Controllers = append(h.Controllers, c)
		}
	}
	return h
}

// New creates the cgroups of a sandbox named key (Key) and writes the
// limits l into them. It returns nil (no error) when h offers no cgroups:
// the sandbox then relies on its pid namespace alone.
func New(h Host, key string, l Limits) (*Set, error) {
	switch h.Version {
	case 1:
		return newSetV1(h.v1, key, l)
	case 2:
		return newSetV2(*h.v2, key, l)
	}
	return nil, nil
}

// cgroupWrite is one setting of a sandbox's cgroups: value into file, in
// the sandbox's cgroup of the hierarchy of controller ("" on v2), or in
// the commands' cgroup below it when cmds.
type cgroupWrite struct {
	controller string
	cmds       bool
	file       string
	value      string
}

// applyWrites writes ws into the set's folders, in order.
func (s *Set) applyWrites(ws []cgroupWrite) error {
	for _, w := range ws {
		key := w.controller
		if s.Version == 2 {
			key = "unified"
		}
		dirs := s.Paths
		if w.cmds {
			dirs = s.Commands
		}
		d, ok := dirs[key]
		if !ok {
			continue // no such hierarchy: the limit was not planned
		}
		if err := os.WriteFile(filepath.Join(d, w.file), []byte(w.value), 0); err != nil {
			return fmt.Errorf("cgroup %s: write %s to %s: %w", d, w.value, w.file, err)
		}
	}
	return nil
}

// mkdirCgroup creates the cgroup folder dir (and the shared parent), also
// when a concurrent destroy removes the parent meanwhile.
func mkdirCgroup(dir string) error {
	err := os.MkdirAll(dir, 0o755)
	if errors.Is(err, os.ErrNotExist) {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return nil
}

// Add moves pid (with all its threads) into every cgroup of the set but
// the commands'.
func (s *Set) Add(pid int) error {
	seen := map[string]bool{}
	for _, d := range s.Paths {
		if seen[d] {
			continue
		}
		seen[d] = true
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("place sandbox init in cgroup %s: %w", d, err)
		}
	}
	return nil
}

// OpenCommandCgroups opens, for writing, the files through which a thread
// of the init joins the commands' cgroups (v1 "tasks", v2
// "cgroup.threads"): the kernel checks the opener's credentials, so the
// init, which may not open them, can write its thread's id into them.
func (s *Set) OpenCommandCgroups() ([]*os.File, error) {
	if s == nil {
		return nil, nil
	}
	file := "tasks"
	if s.Version == 2 {
		file = "cgroup.threads"
	}
	var out []*os.File
	seen := map[string]bool{}
	for _, d := range s.Commands {
		if seen[d] {
			continue
		}
		seen[d] = true
		f, err := os.OpenFile(filepath.Join(d, file), os.O_WRONLY, 0)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("open the commands' cgroup %s: %w", d, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// OpenMetricsCgroups returns detached mounts (open_tree) of the sandbox's
// own folders of the controllers whose figures the toolbox reports: v1
// cpu, cpuacct and the commands' memory folder (whose limit is the
// MemoryMB asked for; the sandbox's own has the init's headroom on top),
// v2 the one folder. A detached mount's root has no parent: ".." from it
// stays there, so the init, which resolves paths the sandbox makes, holds
// no way up into the host's cgroup tree or file system (an O_PATH
// descriptor of the folder would be one: /proc/self/fd/N/../..). On v2 the
// toolbox then reads memory.max and cpu.max of the sandbox's cgroup only,
// which is where the sandbox's limits are.
func (s *Set) OpenMetricsCgroups() ([]*os.File, error) {
	if s == nil {
		return nil, nil
	}
	var out []*os.File
	seen := map[string]bool{}
	for _, c := range []string{"unified", "cpu", "cpuacct", "memory"} {
		d, ok := s.Paths[c]
		if cmds, isV1 := s.Commands[c]; isV1 && c == "memory" {
			d = cmds
		}
		if !ok || seen[d] {
			continue
		}
		seen[d] = true
		f, err := detachedMount(d)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("open the sandbox's cgroup: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// detachedMount returns a detached mount (open_tree, close-on-exec) of
// exactly the folder dir, which the init may hold: nothing outside dir is
// reachable from it.
func detachedMount(dir string) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("detached mount of %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// Destroy kills every process left in the set and removes its folders.
// It thaws a frozen set first: frozen v1 tasks do not die.
func (s *Set) Destroy(ctx context.Context) error {
	if s == nil {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	tctx, cancel := context.WithDeadline(ctx, deadline)
	_ = s.Thaw(tctx)
	cancel()
	if s.Version == 2 {
		killCgroupV2(s.Paths["unified"])
	}
	for _, d := range s.Dirs() {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := emptyAndRemove(ctx, d, deadline); err != nil {
			return err
		}
	}
	return nil
}

// emptyAndRemove kills the processes of the cgroup folder d until it can
// remove d, then removes the shared parent too once it is empty (it is
// busy, and stays, while other sandboxes run).
func emptyAndRemove(ctx context.Context, d string, deadline time.Time) error {
	for {
		pids := readPids(d)
		if len(pids) == 0 {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				if p := filepath.Dir(d); filepath.Base(p) == Parent {
					_ = syscall.Rmdir(p)
				}
				return nil
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cgroup %s: %d processes survive SIGKILL", d, len(pids))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Resources reads the limits and usage of the set.
func (s *Set) Resources() *sandbox.Usage {
	if s.Version == 1 {
		return resourcesV1(s.Paths)
	}
	return resourcesV2(s.Paths["unified"])
}

// newResources returns the resources of a sandbox without limits.
func newResources() *sandbox.Usage {
	return &sandbox.Usage{CPUCores: float64(runtime.NumCPU())}
}

// cpuShares returns the v1 CPU shares of cpu cores: 1024 per core, as
// Kubernetes converts CPU requests, within the kernel's bounds.
func cpuShares(cpu float64) int64 {
	return min(max(int64(cpu*1024), 2), 262144)
}

// mib returns n MiB in bytes, as a cgroup file takes it.
func mib(n int64) string { return strconv.FormatInt(n<<20, 10) }

// bytesToMB converts a byte count to MB, rounding up when up.
func bytesToMB(n int64, up bool) int64 {
	const mb = 1 << 20
	if up {
		return (n + mb - 1) / mb
	}
	return n / mb
}

// Parents returns the folders of the hierarchies sandboxes use (h's
// version) that hold the sandboxes' cgroups (Parent, below this process's
// own cgroup on v1, as New places them).
func (h Host) Parents() []string {
	var out []string
	switch h.Version {
	case 1:
		own := ownCgroups()
		for _, m := range h.v1 {
			out = append(out, filepath.Join(m.dir, own[m.controllers[0]], Parent))
		}
	case 2:
		out = append(out, filepath.Join(h.v2.dir, Parent))
	}
	return out
}

// Sweep removes the cgroups named prefix+name, below h's Parents, for
// which orphan(name) reports true: those of sandboxes that are gone, left
// by a process that died while it created or removed one. Only empty
// cgroups can go (rmdir refuses others); errors are ignored: the next
// sweep tries again.
func Sweep(h Host, prefix string, orphan func(name string) bool) {
	for _, parent := range h.Parents() {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name, ok := strings.CutPrefix(e.Name(), prefix)
			if !ok || !e.IsDir() || !orphan(name) {
				continue
			}
			dir := filepath.Join(parent, e.Name())
			if subs, err := os.ReadDir(dir); err == nil {
				for _, s := range subs {
					if s.IsDir() {
						_ = unix.Rmdir(filepath.Join(dir, s.Name()))
					}
				}
			}
			_ = unix.Rmdir(dir)
		}
	}
}

// MemoryLimitMB returns the smaller of total and the memory limits of
// this process's own cgroups, in MiB.
func MemoryLimitMB(total int64) int64 {
	own := ownCgroups()
	mounts, err := cgroupMounts()
	if err != nil {
		return total
	}
	for _, m := range mounts {
		file, path := "memory.limit_in_bytes", own["memory"]
		if m.v2 {
			file, path = "memory.max", own[""]
		} else if !slices.Contains(m.controllers, "memory") {
			continue
		}
		if n, ok := cgroupfile.ReadInt(filepath.Join(m.dir, path, file)); ok && n>>20 < total {
			total = n >> 20
		}
	}
	return total
}

// closeAll closes files.
func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
