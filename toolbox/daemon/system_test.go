package daemon

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

func (e *testEnv) ports() []int {
	e.t.Helper()
	var pl toolbox.PortList
	if err := json.Unmarshal(e.expect(200, "GET", "/port", nil), &pl); err != nil || pl.Ports == nil {
		e.t.Fatalf("GET /port: %+v %v", pl, err)
	}
	return pl.Ports
}

func (e *testEnv) portInUse(port int) bool {
	e.t.Helper()
	var r toolbox.IsPortInUseResponse
	if err := json.Unmarshal(e.expect(200, "GET", "/port/"+strconv.Itoa(port)+"/in-use", nil), &r); err != nil {
		e.t.Fatal(err)
	}
	return r.IsInUse
}

// A listening socket is reported by GET /port and /port/{port}/in-use,
// and no longer once it is closed.
func TestPortsListListeners(t *testing.T) {
	e := newEnv(t, true)
	for _, network := range []string{"tcp4", "tcp6"} {
		ln, err := net.Listen(network, "localhost:0")
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if ports := e.ports(); !slices.Contains(ports, port) || !slices.IsSorted(ports) {
			t.Errorf("%s port %d not in %v", network, port, ports)
		}
		if !e.portInUse(port) {
			t.Errorf("%s port %d not in use", network, port)
		}
		ln.Close()
		if e.portInUse(port) {
			t.Errorf("%s port %d still in use after close", network, port)
		}
	}
}

// A connected (not listening) socket's port is not reported.
func TestPortsIgnoreConnections(t *testing.T) {
	e := newEnv(t, true)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.TCPAddr).Port
	if slices.Contains(e.ports(), local) {
		t.Errorf("the client side port %d of a connection is listed", local)
	}
}

func TestPortInUseBadPort(t *testing.T) {
	e := newErrEnv(t)
	for _, p := range []string{"0", "65536", "-1", "http", "80a"} {
		e.expectError(400, codeBadRequest, "GET", "/port/"+p+"/in-use", nil)
	}
}

func TestParseListening(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:C351 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 20 4 30 10 -1
`
	seen := map[int]bool{}
	if err := parseListening(strings.NewReader(table), seen); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || !seen[8080] || !seen[22] {
		t.Errorf("ports %v, want 22 and 8080", seen)
	}
}

// fakeCgroup writes cgroup files (name → content) into a new folder.
func fakeCgroup(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	return dir
}

func (e *testEnv) metrics() toolbox.SystemMetrics {
	e.t.Helper()
	var m toolbox.SystemMetrics
	if err := json.Unmarshal(e.expect(200, "GET", "/system/metrics", nil), &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// checkCommon checks what every metrics answer has: the disk of the work
// dir and the timestamps.
func checkCommon(t *testing.T, m toolbox.SystemMetrics) {
	t.Helper()
	if m.DiskTotal <= 0 || m.DiskFree < 0 || m.DiskUsed < 0 || m.DiskFree > m.DiskTotal || m.DiskUsed > m.DiskTotal {
		t.Errorf("disk total %d used %d free %d", m.DiskTotal, m.DiskUsed, m.DiskFree)
	}
	ts, err := time.Parse(time.RFC3339, m.Timestamp)
	if err != nil || ts.Unix() != m.TimestampUnix || time.Since(ts) > time.Minute {
		t.Errorf("timestamp %q, unix %d: %v", m.Timestamp, m.TimestampUnix, err)
	}
}

func TestMetricsCgroupV2(t *testing.T) {
	dir := fakeCgroup(t, map[string]string{
		"cgroup.controllers": "cpu memory pids\n",
		"cpu.max":            "150000 100000\n",
		"cpu.stat":           "usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\n",
		"memory.max":         "1073741824\n",
		"memory.current":     "314572800\n",
		"memory.stat":        "anon 104857600\nfile 209715200\ninactive_file 52428800\n",
	})
	e := newEnv(t, true, func(o *Options) { o.Cgroups = []string{dir} })
	m := e.metrics()
	if m.CPUCount != 2 || m.MemTotal != 1<<30 || m.MemUsed != 300<<20-50<<20 || m.MemCache != 200<<20 || m.CPUUsedPct != 0 {
		t.Errorf("metrics %+v", m)
	}
	checkCommon(t, m)
}

func TestMetricsCgroupV1(t *testing.T) {
	cpu := fakeCgroup(t, map[string]string{"cpu.cfs_quota_us": "50000\n", "cpu.cfs_period_us": "100000\n"})
	acct := fakeCgroup(t, map[string]string{"cpuacct.usage": "123456789\n"})
	mem := fakeCgroup(t, map[string]string{
		"memory.usage_in_bytes": "104857600\n",
		"memory.limit_in_bytes": "9223372036854771712\n",
		"memory.stat":           "cache 1\ntotal_cache 20971520\ntotal_inactive_file 10485760\nhierarchical_memory_limit 536870912\n",
	})
	e := newEnv(t, true, func(o *Options) { o.Cgroups = []string{cpu, acct, mem} })
	m := e.metrics()
	if m.CPUCount != 1 || m.MemTotal != 512<<20 || m.MemUsed != 90<<20 || m.MemCache != 20<<20 {
		t.Errorf("metrics %+v", m)
	}
	checkCommon(t, m)
}

// The limits are the smallest of the cgroup's and its parents', also for
// a cgroup named through a descriptor (as a sandbox's init names its own).
func TestMetricsLimitFromParent(t *testing.T) {
	parent := fakeCgroup(t, map[string]string{
		"memory.max": "268435456\n", "cpu.max": "100000 100000\n",
		"child/memory.max": "max\n", "child/memory.current": "1048576\n", "child/cpu.max": "max 100000\n",
	})
	d, err := os.Open(filepath.Join(parent, "child"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, dir := range []string{filepath.Join(parent, "child"), "/proc/self/fd/" + strconv.Itoa(int(d.Fd()))} {
		e := newEnv(t, true, func(o *Options) { o.Cgroups = []string{dir} })
		if m := e.metrics(); m.MemTotal != 256<<20 || m.CPUCount != 1 || m.MemUsed != 1<<20 {
			t.Errorf("cgroup %s: %+v", dir, m)
		}
	}
}

// cpuUsedPct is the CPU time used over the window since the previous
// sample, as a share of the CPU limit.
func TestMetricsCPUUsedPct(t *testing.T) {
	dir := fakeCgroup(t, map[string]string{"cpu.max": "100000 100000\n", "cpu.stat": "usage_usec 1000000\n"})
	e := newEnv(t, true, func(o *Options) { o.Cgroups = []string{dir} })
	if m := e.metrics(); m.CPUUsedPct != 0 {
		t.Fatalf("idle cgroup: %v%%", m.CPUUsedPct)
	}
	// 40 ms of CPU time more: at most 40% of one core over a window of at
	// least minCPUWindow.
	os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("usage_usec 1040000\n"), 0o644)
	deadline := time.Now().Add(10 * time.Second)
	for {
		pct := e.metrics().CPUUsedPct
		if pct > 0 {
			if pct > 40 {
				t.Errorf("cpuUsedPct %v, want at most 40", pct)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("cpuUsedPct stayed 0")
		}
		time.Sleep(minCPUWindow / 4)
	}
}

// Without Options.Cgroups the server reads its own cgroups (or the
// machine's figures): the numbers are plausible.
func TestMetricsOwnCgroups(t *testing.T) {
	e := newEnv(t, true)
	m := e.metrics()
	if m.CPUCount < 1 || m.MemTotal <= 0 || m.MemUsed <= 0 || m.MemUsed > m.MemTotal || m.CPUUsedPct < 0 || m.CPUUsedPct > 100 {
		t.Errorf("metrics %+v", m)
	}
	checkCommon(t, m)
}

func TestOwnCgroups(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	// cgroup v2 inside a cgroup namespace, and mounted below the host's
	// root of the hierarchy.
	v2mi := write("mi2", "30 22 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n")
	if got := ownCgroups(write("cg2", "0::/\n"), v2mi); !slices.Equal(got, []string{"/sys/fs/cgroup"}) {
		t.Errorf("v2 namespaced: %q", got)
	}
	if got := ownCgroups(write("cg2b", "0::/user.slice/app\n"), v2mi); !slices.Equal(got, []string{"/sys/fs/cgroup/user.slice/app"}) {
		t.Errorf("v2: %q", got)
	}
	sub := write("mi2sub", "30 22 0:27 /box /mnt/cg rw - cgroup2 cgroup2 rw\n")
	if got := ownCgroups(write("cg2c", "0::/box/inner\n"), sub); !slices.Equal(got, []string{"/mnt/cg/inner"}) {
		t.Errorf("v2 mounted below the root: %q", got)
	}
	// cgroup v1 with hybrid v2, joined and separate controllers.
	v1mi := write("mi1", `31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
35 30 0:32 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`)
	got := ownCgroups(write("cg1", "5:pids:/a\n4:memory:/box\n2:cpu,cpuacct:/box\n0::/\n"), v1mi)
	if !slices.Equal(got, []string{"/sys/fs/cgroup/memory/box", "/sys/fs/cgroup/cpu,cpuacct/box"}) {
		t.Errorf("v1: %q", got)
	}
}

func (e *testEnv) updateEnv(req toolbox.UpdateEnvRequest) {
	e.t.Helper()
	var r toolbox.MessageResponse
	if err := json.Unmarshal(e.expect(200, "POST", "/env", req), &r); err != nil || r.Message == "" {
		e.t.Fatalf("POST /env: %+v %v", r, err)
	}
}

func (e *testEnv) execute(command string) string {
	e.t.Helper()
	var r toolbox.ExecuteResponse
	if err := json.Unmarshal(e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{Command: command}), &r); err != nil {
		e.t.Fatal(err)
	}
	return r.Result
}

// POST /env changes the environment of one-shot executions and sessions
// started afterwards; a session created before keeps its own.
func TestUpdateEnvReachesNewProcesses(t *testing.T) {
	e := newEnv(t, true, func(o *Options) {
		o.Env = append(o.Env, "OLD=gone", "KEEP=kept", "SECRET_A=placeholder:1", "SECRET_B=placeholder:2")
	})
	e.createSession("before")
	e.updateEnv(toolbox.UpdateEnvRequest{
		Set:              map[string]string{"NEW": "a b'c", "SECRET_B": "real"},
		Unset:            []string{"OLD"},
		UnsetValuePrefix: "placeholder:",
	})
	const show = `echo "NEW=$NEW OLD=${OLD-unset} KEEP=$KEEP A=${SECRET_A-unset} B=$SECRET_B"`
	const want = "NEW=a b'c OLD=unset KEEP=kept A=unset B=real"
	if got := strings.TrimSpace(e.execute(show)); got != want {
		t.Errorf("execute: %q, want %q", got, want)
	}
	e.createSession("after")
	if got := strings.TrimSpace(*e.execSync("after", show).Stdout); got != want {
		t.Errorf("new session: %q, want %q", got, want)
	}
	if got := strings.TrimSpace(*e.execSync("before", `echo "$OLD ${NEW-unset}"`).Stdout); got != "gone unset" {
		t.Errorf("older session: %q", got)
	}
}

// An invalid name or value refuses the request whole.
func TestUpdateEnvBadInputChangesNothing(t *testing.T) {
	e := newErrEnv(t, func(o *Options) { o.Env = append(o.Env, "KEEP=kept") })
	for _, req := range []toolbox.UpdateEnvRequest{
		{Set: map[string]string{"GOOD": "1", "BAD-NAME": "x"}, Unset: []string{"KEEP"}},
		{Set: map[string]string{"GOOD": "nul\x00"}, Unset: []string{"KEEP"}},
		{Set: map[string]string{"GOOD": "1"}, Unset: []string{"KEEP", "a=b"}},
	} {
		e.expectError(400, codeBadRequest, "POST", "/env", req)
	}
	e.expectError(400, codeInvalidRequestBody, "POST", "/env", []byte(`{"set":[1]}`), "Content-Type", "application/json")
	if got := strings.TrimSpace(e.execute(`echo "$KEEP ${GOOD-unset}"`)); got != "kept unset" {
		t.Errorf("environment changed: %q", got)
	}
}

func TestInit(t *testing.T) {
	e := newEnv(t, true)
	var r toolbox.MessageResponse
	if err := json.Unmarshal(e.expect(200, "POST", "/init", toolbox.InitializeRequest{Token: "tok"}), &r); err != nil || r.Message == "" {
		t.Errorf("POST /init: %+v %v", r, err)
	}
	bad := newErrEnv(t)
	bad.expectError(400, codeInvalidRequestBody, "POST", "/init", toolbox.InitializeRequest{})
	bad.expectError(400, codeInvalidRequestBody, "POST", "/init", []byte(`not json`), "Content-Type", "application/json")
}
