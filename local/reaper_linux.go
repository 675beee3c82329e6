package local

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/procfs"
)

// reapOrphans reaps the zombies that no one else will wait for: children
// of PID 1 that the toolbox server did not start itself. Processes started
// through os/exec are held by a pidfd in this process and are left to their
// Wait.
func reapOrphans() {
	pids, err := procfs.PIDs()
	if err != nil {
		return
	}
	var held map[int]bool
	for _, pid := range pids {
		if pid == 1 {
			continue
		}
		st, err := procfs.ReadStat(pid)
		if err != nil || st.State != 'Z' || st.PPID != 1 {
			continue
		}
		if held == nil {
			held = heldPidfds()
		}
		if held[pid] {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// heldPidfds returns the pids this process holds a pidfd for.
func heldPidfds() map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return out
	}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.Index(s, "\nPid:"); i >= 0 {
			line := s[i+5:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
				out[pid] = true
			}
		}
	}
	return out
}
