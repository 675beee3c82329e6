package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 1, 1, 1, 100}, 1},
	} {
		in := append([]float64(nil), tt.in...)
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		for i := range in {
			if in[i] != tt.in[i] {
				t.Errorf("median reordered its argument: %v, was %v", tt.in, in)
			}
		}
	}
}

func TestRatioAndGoal(t *testing.T) {
	if got := ratio(30, 10); got != 3 {
		t.Errorf("ratio(30, 10) = %v", got)
	}
	if got := ratio(30, 0); got != 0 {
		t.Errorf("ratio(30, 0) = %v, want 0 (no baseline)", got)
	}
	r := Result{OpSamples: []float64{50, 10, 30}, BaseSamples: []float64{2, 3, 4}, Goal: Goal{Of: "ratio", Cmp: "<=", Limit: 10}}
	r.finish()
	if r.Op != 30 || r.Base != 3 || r.Ratio != 10 || r.Met == nil || !*r.Met {
		t.Errorf("finish: %+v, want op 30, base 3, ratio 10, met", r)
	}
	r.Goal.Limit = 9.9
	r.finish()
	if r.Met == nil || *r.Met {
		t.Errorf("ratio 10 against ≤ 9.9: met %v, want false", r.Met)
	}
	up := Result{OpSamples: []float64{0.6}, BaseSamples: []float64{1}, Goal: Goal{Of: "ratio", Cmp: ">=", Limit: 0.7}}
	up.finish()
	if up.Met == nil || *up.Met {
		t.Errorf("0.6 against ≥ 0.7: met %v, want false", up.Met)
	}
	op := Result{OpSamples: []float64{1.4}, Goal: Goal{Of: "op", Cmp: "<=", Limit: 1.5}}
	op.finish()
	if op.Ratio != 0 || op.Met == nil || !*op.Met {
		t.Errorf("op 1.4 against ≤ 1.5: %+v, want met without a ratio", op)
	}
	none := Result{OpSamples: []float64{1}}
	none.finish()
	if none.Met != nil {
		t.Errorf("no goal: met %v, want nil", *none.Met)
	}
	if _, ok := (Goal{Of: "op", Cmp: "<="}).met(Result{Error: "x"}); ok {
		t.Error("a failed figure was judged against its goal")
	}
}

func TestTable(t *testing.T) {
	ok := Result{Figure: "exec `true`", Unit: "ms", OpSamples: []float64{2.2}, BaseSamples: []float64{2}, Baseline: "os/exec `true`",
		Goal: Goal{Of: "ratio", Cmp: "<=", Limit: 1.1, Text: "keep ≤ 1.1×"}, Note: "blocked network"}
	ok.finish()
	bad := failed("create", "create | first", Goal{Text: "≤ 10×"}, os.ErrPermission)
	na := failed("pool", "pool", Goal{Text: "≤ 5×"}, errString("n/a rootless: local.Pool needs root"))
	got := table([]Result{ok, bad, na})
	for _, want := range []string{
		"| figure | op (median) | baseline (median) | ratio | goal | met? |\n|---|---|---|---|---|---|\n",
		"| exec `true` | 2.2 ms | 2 ms (os/exec `true`) | 1.1× | keep ≤ 1.1× | yes |\n",
		"| create \\| first | error: permission denied | — | — | ≤ 10× | n/a |\n",
		"| pool | n/a rootless: local.Pool needs root | — | — | ≤ 5× | n/a |\n",
		"\nNotes:\n- exec `true`: blocked network\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestMergedTable(t *testing.T) {
	a := Result{Figure: "exec", Unit: "ms", OpSamples: []float64{4}, BaseSamples: []float64{2}, Goal: Goal{Of: "ratio", Cmp: "<=", Limit: 1.1, Text: "≤ 1.1×"}}
	a.finish()
	b := Result{Figure: "pss", Unit: "MB", OpSamples: []float64{2.5}, Goal: Goal{Of: "op", Cmp: "<=", Limit: 3, Text: "≤ 3 MB"}, Note: "20 sandboxes"}
	b.finish()
	var cols []Column
	cols = addColumn(cols, "old root", []Result{a})
	cols = addColumn(cols, "new root", []Result{b})
	cols = addColumn(cols, "old root", []Result{b}) // a second file of the same run
	if len(cols) != 2 || len(cols[0].Results) != 2 {
		t.Fatalf("addColumn: %+v, want 2 columns, the first with 2 results", cols)
	}
	got := mergedTable(cols)
	for _, want := range []string{
		"| figure | goal | old root | new root |\n|---|---|---|---|\n",
		"| exec | ≤ 1.1× | **2×** (4 / 2 ms) (not met) | not run |\n",
		"| pss | ≤ 3 MB | 2.5 MB | 2.5 MB |\n",
		"- pss: 20 sandboxes\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("merged table lacks %q:\n%s", want, got)
		}
	}
}

func TestParsePss(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "smaps_rollup"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parsePss(f)
	if err != nil || got != 1234<<10 {
		t.Errorf("parsePss(fixture) = %d, %v, want %d", got, err, 1234<<10)
	}
	if got, err := parsePss(strings.NewReader("Pss_Dirty: 9 kB\nPss:  7 kB\n")); err != nil || got != 7<<10 {
		t.Errorf("parsePss with Pss_Dirty first = %d, %v, want %d", got, err, 7<<10)
	}
	for _, in := range []string{"", "Rss: 4 kB\n", "Pss: x kB\n", "Pss: 4 MB\n"} {
		if _, err := parsePss(strings.NewReader(in)); err == nil {
			t.Errorf("parsePss(%q): no error", in)
		}
	}
}

func TestClassify(t *testing.T) {
	procs := map[int]proc{
		1:  {PID: 1, Cmdline: "/sbin/init"},
		10: {PID: 10, PPID: 1, Cmdline: "fastbench -rows pss", Start: 50, Pss: 1000},
		20: {PID: 20, PPID: 1, Cmdline: "agentbox-init pss-00", Start: 110, Pss: 300},
		21: {PID: 21, PPID: 20, Cmdline: "bash -c x", Start: 111, Pss: 30},
		22: {PID: 22, PPID: 21, Cmdline: "sleep 1", Start: 112, Pss: 3},
		30: {PID: 30, PPID: 1, Cmdline: "agentbox-init pss-01", Start: 120, Pss: 200},
		40: {PID: 40, PPID: 1, Cmdline: "agentbox-init other", Start: 130, Pss: 999},       // not ours
		41: {PID: 41, PPID: 40, Cmdline: "bash", Start: 131, Pss: 999},                     // not ours
		50: {PID: 50, PPID: 10, Cmdline: "agentbox-netsock", Start: 115, Pss: 40},          // below the harness
		51: {PID: 51, PPID: 1, Cmdline: "/usr/bin/pasta --config-net", Start: 116, Pss: 5}, // named
		52: {PID: 52, PPID: 1, Cmdline: "agentbox-netproxy", Start: 90, Pss: 777},          // before the row
		53: {PID: 53, PPID: 1, Cmdline: "go build", Start: 117, Pss: 999},                  // unrelated
		54: {PID: 54, PPID: 10, Cmdline: "agentbox-init", Start: 118, Pss: 77},             // a pool's spare: not a helper
	}
	c := classify(procs, map[string]bool{"pss-00": true, "pss-01": true}, 10, 100)
	if c.Sandboxes != 2 || c.InsideB != 533 || len(c.Inside) != 4 {
		t.Errorf("inside: %d sandboxes, %d processes, %d B; want 2, 4, 533", c.Sandboxes, len(c.Inside), c.InsideB)
	}
	if c.HelpersB != 45+77 || len(c.Helpers) != 3 {
		t.Errorf("helpers: %+v (%d B), want pids 50, 51, 54 (122 B)", c.Helpers, c.HelpersB)
	}
}

func TestIsHelper(t *testing.T) {
	for in, want := range map[string]bool{
		"agentbox-netproxy":            true,
		"/usr/bin/pasta -f":            true,
		"agentbox-netsock":             true,
		"agentbox-init sbx-1":          false,
		"agentbox exec --id x -- true": false,
		"bash":                         false,
	} {
		if got := isHelper(in); got != want {
			t.Errorf("isHelper(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	c, err := parseFlags([]string{"-rows", "exec, ls", "-rounds", "3"}, &stderr)
	if err != nil || strings.Join(c.rows, ",") != "exec,ls" || c.rounds != 3 {
		t.Errorf("parseFlags: %+v, %v", c, err)
	}
	for _, args := range [][]string{{"-rows", "bogus"}, {"-rounds", "0"}, {"stray"}, {"-pss-n", "0"}} {
		if _, err := parseFlags(args, &stderr); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
	if c, err := parseFlags([]string{"-merge", "a=x.json"}, &stderr); err != nil || len(c.args) != 1 {
		t.Errorf("parseFlags(-merge a=x.json) = %+v, %v", c, err)
	}
}
