package daemon

import (
	"syscall"
	"time"
)

// markerKey is the private environment variable that tags every process a
// command starts, so that daemonised descendants (which left the process
// group with setsid) can still be found (see findProcs).
const markerKey = "AGENTBOX_SESSION_CMD"

// killGrace is how long processes get between SIGTERM and SIGKILL.
const killGrace = time.Second

// killPoll is how often killTree looks whether the processes are gone.
const killPoll = 10 * time.Millisecond

// killRounds bounds the SIGKILL rounds: new children may appear while
// killTree works.
const killRounds = 50

// killTree ends every process in the process groups pgids and every process
// whose environment carries markerKey with a value starting with
// markerPrefix: SIGTERM first, SIGKILL after killGrace. It returns when no
// such process is alive (zombies count as dead) or after a bounded time.
func killTree(pgids []int, markerPrefix string) {
	marker := markerKey + "=" + markerPrefix
	signalAll := func(sig syscall.Signal) []int {
		for _, pg := range pgids {
			if pg > 1 {
				_ = syscall.Kill(-pg, sig)
			}
		}
		pids := findProcs(pgids, marker)
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
		return pids
	}
	if len(signalAll(syscall.SIGTERM)) == 0 {
		return
	}
	deadline := time.Now().Add(killGrace)
	for time.Now().Before(deadline) {
		time.Sleep(killPoll)
		if len(findProcs(pgids, marker)) == 0 {
			return
		}
	}
	for range killRounds {
		if len(signalAll(syscall.SIGKILL)) == 0 {
			return
		}
		time.Sleep(killPoll)
	}
}
