//go:build linux

package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Limit probes: a hostile command tries to exhaust memory, processes, CPU
// and disk. Each probe asserts that the limit held (the kernel's own
// counters prove the limit was reached, not merely that the command
// failed) and that the sandbox, and the host, are fine afterwards.

// limitedSandbox starts a sandbox with the resources r (and c's other
// settings), as root.
func limitedSandbox(t *testing.T, r local.Resources, c local.Config) *local.Sandbox {
	t.Helper()
	testenv.NeedRoot(t, "resource limits need root")
	c.Resources = r
	return newSandbox(t, local.Options{Config: c})
}

// cgroupFile reads a file of the sandbox's cgroup of controller (v1; on v2
// the one cgroup), or of its commands' cgroup when cmds.
func cgroupFile(t *testing.T, sb *local.Sandbox, controller string, cmds bool, file string) string {
	t.Helper()
	d := local.CgroupDir(sb, controller, cmds)
	if d == "" {
		d = local.CgroupDir(sb, "unified", cmds)
	}
	b, err := os.ReadFile(filepath.Join(d, file))
	if err != nil {
		t.Fatalf("cgroup of %s: %v", controller, err)
	}
	return string(b)
}

// cgroupV1 reports whether the sandbox's cgroups are v1 ones.
func cgroupV1(sb *local.Sandbox) bool { return local.CgroupDir(sb, "memory", false) != "" }

// keyedValue returns the number after key in a "key value" line of s.
func keyedValue(t *testing.T, s, key string) int64 {
	t.Helper()
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no %q in %q", key, s)
	return 0
}

// oomKills returns how many processes the out-of-memory killer killed in
// the commands' memory cgroup.
func oomKills(t *testing.T, sb *local.Sandbox) int64 {
	t.Helper()
	if cgroupV1(sb) {
		return keyedValue(t, cgroupFile(t, sb, "memory", true, "memory.oom_control"), "oom_kill")
	}
	return keyedValue(t, cgroupFile(t, sb, "memory", false, "memory.events"), "oom_kill")
}

// pidsLimitHits returns how many forks the commands' pids limit refused.
func pidsLimitHits(t *testing.T, sb *local.Sandbox) int64 {
	t.Helper()
	return keyedValue(t, cgroupFile(t, sb, "pids", true, "pids.events"), "max")
}

// memoryHog is a command that holds ever more memory: tail keeps the whole
// endless line it reads.
const memoryHog = "head -c 2000m /dev/zero | tail"

// checkUsable checks that the sandbox still runs commands, with the same
// init.
func checkUsable(t *testing.T, sb *local.Sandbox, initPID int) {
	t.Helper()
	if got := mustRun(t, sb, "echo still here"); got != "still here\n" {
		t.Errorf("next command: %q", got)
	}
	if pid := local.InitPID(sb); pid != initPID {
		t.Errorf("the init changed: %d, was %d", pid, initPID)
	}
}

func TestLimitMemoryForeground(t *testing.T) {
	sb := limitedSandbox(t, local.Resources{MemoryMiB: 96}, local.Config{})
	init := local.InitPID(sb)
	before := oomKills(t, sb)
	r := run(t, sb, memoryHog)
	if r.ExitCode != 137 {
		t.Errorf("memory hog: exit %d, want 137 (killed); stderr %q", r.ExitCode, r.Stderr)
	}
	if n := oomKills(t, sb); n <= before {
		t.Errorf("the out-of-memory killer killed nothing (oom_kill %d → %d): the hog did not reach the limit", before, n)
	}
	checkUsable(t, sb, init)
}

func TestLimitMemoryBackground(t *testing.T) {
	ctx := context.Background()
	sb := limitedSandbox(t, local.Resources{MemoryMiB: 96}, local.Config{})
	init := local.InitPID(sb)
	before := oomKills(t, sb)
	p, err := sb.Processes().Spawn(ctx, memoryHog, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if r, err := p.Wait(wctx); err != nil || r.ExitCode != 137 {
		t.Errorf("spawned memory hog: %+v, %v; want exit 137", r, err)
	}
	// A daemon (setsid, its parent gone) is held too.
	mustRun(t, sb, "setsid sh -c '"+memoryHog+"' >/dev/null 2>&1 < /dev/null &")
	if !poll(time.Minute, func() bool { return oomKills(t, sb) >= before+2 }) {
		t.Errorf("oom_kill %d, want %d: the daemonised hog was not killed", oomKills(t, sb), before+2)
	}
	checkUsable(t, sb, init)
}

func TestLimitForkBomb(t *testing.T) {
	const pids = 64
	sb := limitedSandbox(t, local.Resources{PIDs: pids}, local.Config{})
	init := local.InitPID(sb)
	ns := pidNS(init)
	type result struct {
		r   *sandbox.CommandResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The killer kills the bomb's whole process group after 3 s (a
		// group kill cannot miss a process being forked).
		r, err := sb.ExecuteCommand(context.Background(), "(sleep 3; kill -KILL 0) & :(){ :|:& }; :; wait", nil, &sandbox.ExecOptions{Timeout: time.Minute})
		done <- result{r, err}
	}()
	if !poll(30*time.Second, func() bool { return pidsLimitHits(t, sb) > 0 }) {
		t.Fatal("the fork bomb never reached the pids limit")
	}
	// The host still forks, and the bomb holds no more than its share.
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("the host cannot start a process during the bomb: %v", err)
	}
	if n := len(procsInNS(ns)); n > 2*pids+64 {
		t.Errorf("%d processes in the sandbox during the bomb, more than its limit allows", n)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.r.ExitCode != 137 {
		t.Errorf("bomb: exit %d, want 137", res.r.ExitCode)
	}
	if !poll(10*time.Second, func() bool {
		n, _ := strconv.Atoi(strings.TrimSpace(cgroupFile(t, sb, "pids", true, "pids.current")))
		return n <= 2
	}) {
		t.Errorf("bomb processes left: pids.current %s", cgroupFile(t, sb, "pids", true, "pids.current"))
	}
	checkUsable(t, sb, init)
}

func TestLimitProcessCount(t *testing.T) {
	const pids = 40
	sb := limitedSandbox(t, local.Resources{PIDs: pids}, local.Config{})
	// Fork sleepers until a fork fails; dash gives up at the first
	// failure, having recorded how many it started.
	r := run(t, sb, "sh -c 'n=0; while :; do sleep 5 & n=$((n+1)); echo $n > /tmp/n; done' 2>/tmp/err; cat /tmp/n /tmp/err")
	lines := strings.SplitN(r.Stdout, "\n", 2)
	n, err := strconv.Atoi(lines[0])
	if err != nil {
		t.Fatalf("output %q", r.Stdout)
	}
	if n >= pids || n < pids/2 {
		t.Errorf("started %d processes under a limit of %d", n, pids)
	}
	if len(lines) < 2 || !strings.Contains(lines[1], "fork") {
		t.Errorf("the last fork did not fail as refused: %q", r.Stdout)
	}
	if pidsLimitHits(t, sb) == 0 {
		t.Error("pids.events counts no refused fork")
	}
}

func TestLimitCPUQuota(t *testing.T) {
	const cpu = 0.2
	sb := limitedSandbox(t, local.Resources{CPUCores: cpu}, local.Config{})
	if got := strings.TrimSpace(cgroupFile(t, sb, "cpu", false, "cpu.shares")); cgroupV1(sb) && got != "204" {
		t.Errorf("cpu.shares %s, want 204 (1024 per core)", got)
	}
	// Two busy loops (one per host core) for 1.5 s.
	mustRun(t, sb, "for i in 1 2; do timeout 1.5 sh -c 'while :; do :; done' & done; wait")
	stat := cgroupFile(t, sb, "cpu", false, "cpu.stat")
	periods, throttled := keyedValue(t, stat, "nr_periods"), keyedValue(t, stat, "nr_throttled")
	var usedUS int64
	if cgroupV1(sb) {
		ns, _ := strconv.ParseInt(strings.TrimSpace(cgroupFile(t, sb, "cpuacct", false, "cpuacct.usage")), 10, 64)
		usedUS = ns / 1000
	} else {
		usedUS = keyedValue(t, stat, "usage_usec")
	}
	if periods < 5 || throttled == 0 {
		t.Fatalf("cpu.stat %q: the busy loops were not throttled", stat)
	}
	// The sandbox used at most its quota in each period it ran (and a
	// period of slack), whatever the wall clock did.
	if limit := int64(float64(periods+1) * cpu * 100000 * 1.05); usedUS > limit {
		t.Errorf("used %d µs of CPU in %d periods: more than the quota allows (%d µs)", usedUS, periods, limit)
	}
	if usedUS < int64(float64(periods)*cpu*100000/2) {
		t.Errorf("used %d µs of CPU in %d periods: the loops hardly ran", usedUS, periods)
	}
}

// TestLimitsHoldEveryProcess: a command's, a spawned process's and a
// daemon's processes are all born in the commands' cgroups, whose limits
// they cannot leave.
func TestLimitsHoldEveryProcess(t *testing.T) {
	ctx := context.Background()
	sb := limitedSandbox(t, local.Resources{PIDs: 100, MemoryMiB: 128}, local.Config{})
	ns := pidNS(local.InitPID(sb))
	p, err := sb.Processes().Spawn(ctx, "exec sleep 4051", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(ctx)
	mustRun(t, sb, "setsid sleep 4052 >/dev/null 2>&1 < /dev/null & (sleep 4053 &)")
	waitRunning(ns, "sleep 405", 3)
	want := map[string]string{
		"memory": local.CgroupDir(sb, "memory", true), "pids": local.CgroupDir(sb, "pids", true),
		"cpu": local.CgroupDir(sb, "cpu", false),
	}
	if !cgroupV1(sb) {
		want = map[string]string{"": local.CgroupDir(sb, "unified", true)}
	}
	found := 0
	for pid, cmd := range procsInNS(ns) {
		if !strings.HasPrefix(cmd, "sleep 405") {
			continue
		}
		found++
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.SplitN(line, ":", 3)
			for ctrl, dir := range want {
				if f[1] == ctrl || (ctrl != "" && strings.Contains(","+f[1]+",", ","+ctrl+",")) {
					if !strings.HasSuffix(dir, f[2]) {
						t.Errorf("%s (%d) is in %s cgroup %s, not %s", cmd, pid, ctrl, f[2], dir)
					}
				}
			}
		}
	}
	if found != 3 {
		t.Errorf("found %d of the 3 sleeps", found)
	}
	mustRun(t, sb, "pkill -f 'sleep 405'; true")
}

// TestLimitsCannotBeRaised: commands see no cgroup file system, cannot
// mount one, and their limits stay as they were.
func TestLimitsCannotBeRaised(t *testing.T) {
	sb := limitedSandbox(t, local.Resources{PIDs: 50, MemoryMiB: 100}, local.Config{})
	before := cgroupFile(t, sb, "pids", true, "pids.max")
	out := mustRun(t, sb, `ls /sys/fs/cgroup 2>&1; echo max > /sys/fs/cgroup/pids/pids.max 2>&1; mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg 2>&1; mount -t cgroup -o pids none /tmp/cg 2>&1; grep -v ':/$' /proc/self/cgroup; echo end`)
	if !strings.HasPrefix(out, "ls: cannot access '/sys/fs/cgroup': No such file or directory") || strings.Count(out, "permission denied") != 2 || !strings.HasSuffix(out, "end\n") {
		t.Errorf("output %q: want no /sys/fs/cgroup and both mounts denied", out)
	}
	if strings.Contains(out, "agentbox") {
		t.Errorf("a host cgroup path shows inside: %q", out)
	}
	if after := cgroupFile(t, sb, "pids", true, "pids.max"); after != before || strings.TrimSpace(after) != "50" {
		t.Errorf("pids.max %q → %q", before, after)
	}
	// The limit files belong to the host's root, whom the sandbox has not.
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(local.CgroupDir(sb, "pids", true), "pids.max"), &st); err != nil || st.Uid != 0 {
		t.Errorf("pids.max owner %d, %v", st.Uid, err)
	}
}

// fillDisk writes zeros into path inside sb until the disk is full and
// returns the command's output.
func fillDisk(t *testing.T, sb *local.Sandbox, path string) string {
	t.Helper()
	r := run(t, sb, "dd if=/dev/zero of="+path+" bs=1M 2>&1")
	if r.ExitCode == 0 || !strings.Contains(r.Stdout, "No space left on device") {
		t.Errorf("dd into %s: exit %d, %q; want ENOSPC", path, r.ExitCode, r.Stdout)
	}
	return r.Stdout
}

// allocatedMB returns the space the file path takes on the host, in MiB.
func allocatedMB(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512 >> 20
}

func TestLimitDiskFill(t *testing.T) {
	const diskMB = 64
	stateDir := newStateDir(t)
	testenv.NeedRoot(t, "disk limits need root")
	c := local.Config{WorkingDirectory: "/workspace", Resources: local.Resources{DiskMiB: diskMB}}
	sb := newSandbox(t, local.Options{StateDir: stateDir, Config: c})
	other := newSandbox(t, local.Options{StateDir: stateDir, Config: c})
	var before unix.Statfs_t
	if err := unix.Statfs(stateDir, &before); err != nil {
		t.Fatal(err)
	}
	fillDisk(t, sb, "~/fill")
	// Home, /tmp and the working directory share the full disk.
	r := run(t, sb, "for d in ~ /tmp /workspace /run/agentbox; do head -c 1M /dev/zero > $d/more 2>&1 || echo $d full; done")
	if want := "/home/agent full\n/tmp full\n/workspace full\n/run/agentbox full\n"; !strings.Contains(r.Stdout, "full") || strings.Count(r.Stdout, "full") != 4 {
		t.Errorf("writes after the disk filled: %q; want %q", r.Stdout, want)
	}
	// The host gave the sandbox no more than its image.
	if mb := allocatedMB(t, local.DiskImage(sb)); mb > diskMB+1 {
		t.Errorf("the image takes %d MiB on the host, more than its %d MiB", mb, diskMB)
	}
	var after unix.Statfs_t
	if err := unix.Statfs(stateDir, &after); err != nil {
		t.Fatal(err)
	}
	// Other processes write to this file system too: allow them 1 GiB.
	if used := (int64(before.Bfree) - int64(after.Bfree)) * before.Bsize >> 20; used > diskMB+1024 {
		t.Errorf("the host file system lost %d MiB", used)
	}
	// Another sandbox still writes.
	if got := mustRun(t, other, "head -c 10M /dev/zero > ~/f && stat -c %s ~/f"); got != "10485760\n" {
		t.Errorf("other sandbox: %q", got)
	}
	// Freeing space makes the sandbox writable again.
	if got := mustRun(t, sb, "rm ~/fill && echo ok > /tmp/x && cat /tmp/x"); got != "ok\n" {
		t.Errorf("after freeing: %q", got)
	}
}

func TestLimitDiskInodes(t *testing.T) {
	const diskMB = 64 // 4096 inodes
	sb := limitedSandbox(t, local.Resources{DiskMiB: diskMB}, local.Config{})
	// The shell reports the failed creation on its stderr.
	r := run(t, sb, "mkdir /tmp/i && cd /tmp/i && n=0; while : > f$n; do n=$((n+1)); done; echo $n; df -i . | tail -1; df -k . | tail -1")
	lines := strings.Split(r.Stdout, "\n")
	n, err := strconv.Atoi(lines[0])
	if err != nil || len(lines) < 3 {
		t.Fatalf("output %q", r.Stdout)
	}
	if n < 3000 || n > diskMB*1024/16 {
		t.Errorf("created %d files on a disk of %d inodes", n, diskMB*1024/16)
	}
	if !strings.Contains(r.Stderr, "No space left on device") {
		t.Errorf("the last create failed with %q, want ENOSPC", r.Stderr)
	}
	// The inodes ran out, not the blocks.
	if f := strings.Fields(lines[1]); len(f) < 5 || f[3] != "0" {
		t.Errorf("df -i: %q, want no inode free", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) < 4 || f[3] == "0" {
		t.Errorf("df: %q, want blocks free", lines[2])
	}
}

// TestLimitDiskLeavesNothing: the disk image persists across stop and
// start; an init that dies (here killed, as in a crash) releases its loop
// device with no host process's help; Destroy leaves no loop device.
func TestLimitDiskLeavesNothing(t *testing.T) {
	ctx := context.Background()
	sb := limitedSandbox(t, local.Resources{DiskMiB: 64}, local.Config{})
	img := local.DiskImage(sb)
	if local.LoopOf(img) == "" {
		t.Fatal("no loop device holds the running sandbox's image")
	}
	mustRun(t, sb, "echo kept > ~/kept && echo tmp > /tmp/kept")
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if dev := local.LoopOf(img); dev != "" {
		t.Errorf("%s still holds the image of a stopped sandbox", dev)
	}
	if got := mustRun(t, sb, "cat ~/kept /tmp/kept"); got != "kept\ntmp\n" {
		t.Errorf("after restart: %q", got)
	}
	pid := local.InitPID(sb)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { return local.LoopOf(img) == "" }) {
		t.Errorf("%s still holds the image after its init died", local.LoopOf(img))
	}
	reapZombie(pid)
	if got := mustRun(t, sb, "cat ~/kept"); got != "kept\n" {
		t.Errorf("after the crash: %q", got)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if dev := local.LoopOf(img); dev != "" {
		t.Errorf("%s still holds the image after Destroy", dev)
	}
	if _, err := os.Stat(img); !os.IsNotExist(err) {
		t.Errorf("image left: %v", err)
	}
}

// TestLimitsInfo: Info and Instructions state the limits in force, the
// defaults included.
func TestLimitsInfo(t *testing.T) {
	ctx := context.Background()
	testenv.NeedRoot(t, "resource limits need root")
	sb := newSandbox(t, local.Options{})
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := info.Limits
	// The default CPU leaves the host a core: all but one, at least one.
	cores := max(1, runtime.NumCPU()-1)
	if l == nil || l.CPUCores != float64(cores) || l.Processes != local.DefaultPIDs || l.MemoryMB < local.MinMemoryMB || l.DiskMB < local.MinDiskMB {
		t.Fatalf("default limits %+v", l)
	}
	if !strings.Contains(l.Note, "cgroup v") || !strings.Contains(l.Note, "ext4 image") || strings.Contains(l.Note, "no ") {
		t.Errorf("note %q", l.Note)
	}
	if r := info.Usage; r == nil || r.MemoryMB != l.MemoryMB || r.DiskMB == 0 || r.DiskMB > l.DiskMB {
		t.Errorf("resources %+v, limits %+v", r, l)
	}
	want := "Limits: " + strconv.Itoa(cores) + " CPU cores, " + strconv.FormatInt(l.MemoryMB, 10) + " MiB of memory"
	if ins := sb.Instructions(); !strings.Contains(ins, want) || !strings.Contains(ins, "1024 processes") {
		t.Errorf("instructions %q lack %q", ins, want)
	}
	quota := strconv.Itoa(cores*100000) + " 100000"
	if cgroupV1(sb) {
		quota = strings.TrimSpace(cgroupFile(t, sb, "cpu", false, "cpu.cfs_quota_us")) + " " + strings.TrimSpace(cgroupFile(t, sb, "cpu", false, "cpu.cfs_period_us"))
		if want := strconv.Itoa(cores*100000) + " 100000"; quota != want {
			t.Errorf("CPU quota and period %q, want %q", quota, want)
		}
	} else if got := strings.TrimSpace(cgroupFile(t, sb, "cpu", false, "cpu.max")); got != quota {
		t.Errorf("cpu.max %q, want %q (the default CPU of %d cores)", got, quota, cores)
	}
	if got := strings.TrimSpace(cgroupFile(t, sb, "memory", true, "memory.limit_in_bytes")); cgroupV1(sb) && got != strconv.FormatInt(l.MemoryMB<<20, 10) {
		t.Errorf("memory limit %s, Info says %d MiB", got, l.MemoryMB)
	}
}

// TestResourcesBadInput: a Resources out of range is an error of New that
// says what is wrong, and nothing is created.
func TestResourcesBadInput(t *testing.T) {
	stateDir := t.TempDir()
	for _, tt := range []struct {
		r    local.Resources
		want string
	}{
		{local.Resources{PIDs: -1}, "negative"},
		{local.Resources{MemoryMiB: 32}, "below 64 MiB"},
		{local.Resources{DiskMiB: 1}, "below 64 MiB"},
		{local.Resources{CPUCores: float64(runtime.NumCPU() + 1)}, "cores"},
		{local.Resources{MemoryMiB: 1 << 40}, "MiB"},
	} {
		_, err := local.New(local.Options{StateDir: stateDir, Config: local.Config{Resources: tt.r}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v; want an error about %q", tt.r, err, tt.want)
		}
		if !errorsIs(err, sandbox.ErrInvalidArgument) && !errorsIs(err, local.ErrLimitUnavailable) {
			t.Errorf("%+v: %v matches neither ErrInvalidArgument nor ErrLimitUnavailable", tt.r, err)
		}
	}
	if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
		t.Errorf("New created %v", ents)
	}
}
