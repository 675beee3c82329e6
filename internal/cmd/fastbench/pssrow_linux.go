package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// rowPSS: -pss-n idle running sandboxes; the Pss (smaps_rollup) of every
// process of each (its init and everything below it) and of the helpers
// started for them outside, divided by their number.
func (b *bench) rowPSS() []Result {
	fail := func(err error) []Result { return []Result{failed("pss", figPSS, goalPSS, err)} }
	run, err := b.running()
	if err != nil {
		return fail(err)
	}
	dir, err := b.stateDir("pss")
	if err != nil {
		return fail(err)
	}
	since := nowTicks()
	ids := map[string]bool{}
	var sbs []*local.Sandbox
	defer func() {
		for _, sb := range sbs {
			destroy(sb)
		}
	}()
	for i := 0; i < b.c.pssN; i++ {
		id := fmt.Sprintf("pss-%02d", i)
		sb, err := startSandbox(b.ctx, local.Options{ID: id, StateDir: dir, Config: run.cfg})
		if err != nil {
			return fail(err)
		}
		sbs = append(sbs, sb)
		ids[id] = true
	}
	time.Sleep(2 * time.Second) // idle: let the inits settle after their first command
	c := classify(scanProcs(true), ids, selfPID(), since)
	if c.Sandboxes != b.c.pssN {
		return fail(fmt.Errorf("found %d of the %d inits (\"agentbox-init ID\")", c.Sandboxes, b.c.pssN))
	}
	r := Result{Row: "pss", Figure: figPSS, Unit: "MB", Goal: goalPSS,
		OpSamples: []float64{float64(c.InsideB+c.HelpersB) / float64(b.c.pssN) / 1e6},
		Note:      pssNote(c, run.note),
		Extra:     map[string]any{"counted": c}}
	r.finish()
	return []Result{r}
}

// pssNote says what the PSS row counted.
func pssNote(c pssCount, netNote string) string {
	names := map[string]int{}
	for _, p := range c.Helpers {
		arg0, _, _ := strings.Cut(p.Cmdline, " ")
		names[arg0]++
	}
	var hs []string
	for n, k := range names {
		hs = append(hs, fmt.Sprintf("%d× %s", k, n))
	}
	slices.Sort(hs)
	helpers := "none"
	if len(hs) > 0 {
		helpers = strings.Join(hs, ", ")
	}
	s := fmt.Sprintf("MB = 10^6 B; %d sandboxes idle 2 s after their first command: %d processes inside (inits and below, %.2f MB), helpers outside started meanwhile (below this harness, or named agentbox-*/pasta/slirp4netns): %s (%.2f MB)",
		c.Sandboxes, len(c.Inside), float64(c.InsideB)/1e6, helpers, float64(c.HelpersB)/1e6)
	if netNote != "" {
		s += "; " + netNote
	}
	return s
}
