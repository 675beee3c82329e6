package cgroup

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLimitWritesV1: what the limits become on cgroup v1, and where.
func TestLimitWritesV1(t *testing.T) {
	l := Limits{CPU: 0.5, MemoryMB: 128, PIDs: 100}
	want := []cgroupWrite{
		{"memory", false, "memory.limit_in_bytes", "201326592"},
		{"memory", false, "memory.memsw.limit_in_bytes", "201326592"},
		{"memory", true, "memory.limit_in_bytes", "134217728"},
		{"memory", true, "memory.memsw.limit_in_bytes", "134217728"},
		{"pids", false, "pids.max", "264"},
		{"pids", true, "pids.max", "100"},
		{"cpu", false, "cpu.cfs_period_us", "100000"},
		{"cpu", false, "cpu.cfs_quota_us", "50000"},
		{"cpu", false, "cpu.shares", "512"},
	}
	if got := limitWritesV1(l, true); !reflect.DeepEqual(got, want) {
		t.Errorf("with swap accounting:\n got %v\nwant %v", got, want)
	}
	noSwap := slicesDelete(want, func(w cgroupWrite) bool { return strings.Contains(w.file, "memsw") })
	if got := limitWritesV1(l, false); !reflect.DeepEqual(got, noSwap) {
		t.Errorf("without swap accounting:\n got %v\nwant %v", got, noSwap)
	}
	if got := limitWritesV1(Limits{}, true); len(got) != 0 {
		t.Errorf("no limits: %v", got)
	}
}

func slicesDelete(ws []cgroupWrite, del func(cgroupWrite) bool) []cgroupWrite {
	var out []cgroupWrite
	for _, w := range ws {
		if !del(w) {
			out = append(out, w)
		}
	}
	return out
}

// TestCgroupSetV2: what a sandbox's cgroups are on cgroup v2, written into
// a folder that plays the hierarchy (this host's v2 hierarchy has no
// controller to try it on).
func TestCgroupSetV2(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset cpu io memory hugetlb pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := Limits{CPU: 1.5, MemoryMB: 256, PIDs: 1024}
	set, err := newSetV2(mount{dir: root, v2: true}, "k", l)
	if err != nil {
		t.Fatal(err)
	}
	sb := filepath.Join(root, Parent, "k")
	want := map[string]string{
		"cgroup.subtree_control":                         "+cpu +memory +pids",
		"agentbox/cgroup.subtree_control":                "+cpu +memory +pids",
		"agentbox/k/memory.max":                          "335544320",
		"agentbox/k/memory.swap.max":                     "0",
		"agentbox/k/pids.max":                            "2112",
		"agentbox/k/cgroup.subtree_control":              "+pids",
		"agentbox/k/cpu.max":                             "150000 100000",
		"agentbox/k/cpu.weight":                          "150",
		"agentbox/k/" + CommandsDir + "/cgroup.type":     "threaded",
		"agentbox/k/" + CommandsDir + "/pids.max":        "1024",
		"agentbox/k/" + CommandsDir + "/memory.max":      "",
		"agentbox/k/" + CommandsDir + "/cgroup.subtree_": "",
	}
	for f, v := range want {
		b, err := os.ReadFile(filepath.Join(root, f))
		if v == "" {
			if err == nil {
				t.Errorf("%s written: %q", f, b)
			}
			continue
		}
		if err != nil || string(b) != v {
			t.Errorf("%s: %q, %v; want %q", f, b, err, v)
		}
	}
	wantSet := &Set{Version: 2, Paths: map[string]string{"unified": sb}, Commands: map[string]string{"unified": filepath.Join(sb, CommandsDir)}}
	if !reflect.DeepEqual(set, wantSet) {
		t.Errorf("set %+v, want %+v", set, wantSet)
	}
	// The init's thread joins the commands through cgroup.threads.
	if err := os.WriteFile(filepath.Join(sb, CommandsDir, "cgroup.threads"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := set.OpenCommandCgroups()
	if err != nil || len(files) != 1 || files[0].Name() != filepath.Join(sb, CommandsDir, "cgroup.threads") {
		t.Errorf("command cgroup files %v, %v", files, err)
	}
	closeAll(files)
	if d := set.Dirs(); len(d) != 2 || d[0] != filepath.Join(sb, CommandsDir) || d[1] != sb {
		t.Errorf("dirs %v: the commands' must come first", d)
	}
	r := resourcesV2(sb)
	if r.CPUCores != 1.5 || r.MemoryMB != 256 {
		t.Errorf("resources %+v", r)
	}
}
