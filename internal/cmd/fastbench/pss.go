package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// parsePss returns the Pss line of a /proc/PID/smaps_rollup, in bytes.
func parsePss(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "Pss:" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("smaps_rollup: Pss %q: %w", f[1], err)
		}
		if len(f) > 2 && f[2] != "kB" {
			return 0, fmt.Errorf("smaps_rollup: Pss unit %q, want kB", f[2])
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("smaps_rollup: no Pss line")
}

// A proc is one process of the host's process list.
type proc struct {
	PID     int    `json:"pid"`
	PPID    int    `json:"ppid"`
	Cmdline string `json:"cmdline"`
	Start   uint64 `json:"-"` // start time, clock ticks since boot
	Pss     int64  `json:"pss"`
}

// descendants returns the pids of roots and of every process below them
// in procs, sorted.
func descendants(procs map[int]proc, roots []int) []int {
	children := map[int][]int{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	seen := map[int]bool{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pid] {
			continue
		}
		if _, ok := procs[pid]; !ok {
			continue
		}
		seen[pid] = true
		stack = append(stack, children[pid]...)
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// helperNames are the argv[0] (or comm) of the processes outside a
// sandbox that serve it: the engine's re-executed helpers and user-mode
// networking.
var helperNames = []string{"agentbox-netproxy", "agentbox-netsock", "agentbox-netstack", "agentbox-egress", "pasta", "passt", "slirp4netns"}

// isHelper reports whether cmdline names a helper process.
func isHelper(cmdline string) bool {
	arg0, _, _ := strings.Cut(cmdline, " ")
	if i := strings.LastIndexByte(arg0, '/'); i >= 0 {
		arg0 = arg0[i+1:]
	}
	if strings.HasPrefix(arg0, "agentbox-") && arg0 != "agentbox-init" {
		return true
	}
	return slices.Contains(helperNames, arg0)
}

// initID returns the sandbox id of an init's cmdline ("agentbox-init ID").
func initID(cmdline string) (string, bool) {
	f := strings.Fields(cmdline)
	if len(f) != 2 || f[0] != "agentbox-init" {
		return "", false
	}
	return f[1], true
}

// A pssCount is what the PSS row counted.
type pssCount struct {
	Sandboxes int    `json:"sandboxes"`
	Inside    []proc `json:"inside"`  // the inits and their descendants
	Helpers   []proc `json:"helpers"` // outside the sandboxes, started for them
	InsideB   int64  `json:"insideBytes"`
	HelpersB  int64  `json:"helpersBytes"`
}

// classify sorts procs into the processes of the sandboxes ids (their
// inits, by cmdline, and everything below them) and their helpers: those
// outside every sandbox, started after since (clock ticks since boot),
// that are below self (this harness) but not self, or whose cmdline names a
// helper (isHelper).
func classify(procs map[int]proc, ids map[string]bool, self int, since uint64) pssCount {
	var roots []int
	for _, p := range procs {
		if id, ok := initID(p.Cmdline); ok && ids[id] {
			roots = append(roots, p.PID)
		}
	}
	var c pssCount
	c.Sandboxes = len(roots)
	inside := map[int]bool{}
	for _, pid := range descendants(procs, roots) {
		inside[pid] = true
		c.Inside = append(c.Inside, procs[pid])
		c.InsideB += procs[pid].Pss
	}
	mine := map[int]bool{}
	for _, pid := range descendants(procs, []int{self}) {
		mine[pid] = true
	}
	var pids []int
	for pid := range procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		p := procs[pid]
		if inside[pid] || pid == self || p.Start < since {
			continue
		}
		if _, isInit := initID(p.Cmdline); isInit {
			continue // another sandbox's
		}
		if mine[pid] || isHelper(p.Cmdline) {
			c.Helpers = append(c.Helpers, p)
			c.HelpersB += p.Pss
		}
	}
	return c
}
