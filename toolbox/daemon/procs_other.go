//go:build !linux

package daemon

import "syscall"

// findProcs cannot list processes without Linux's /proc: it returns, as
// negative ids, the process groups of pgids that still have a member, so
// that killTree signals them until they are gone. Processes that left
// their group (setsid) are not found; marker is unused.
func findProcs(pgids []int, marker string) []int {
	var out []int
	for _, pg := range pgids {
		if pg > 1 && syscall.Kill(-pg, 0) == nil {
			out = append(out, -pg)
		}
	}
	return out
}
