package local

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/procfs"
)

// procStartTime returns the start time of pid and whether it is alive
// (exists and is not a zombie).
func procStartTime(pid int) (uint64, bool) {
	s, err := procfs.ReadStat(pid)
	if err != nil {
		return 0, false
	}
	return s.StartTime, s.Live()
}

// terminate asks the init r to shut down (SIGTERM) and kills it after a
// grace period, through a pidfd so that a reused pid is never signalled.
func terminate(ctx context.Context, r initRecord) {
	pfd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return
	}
	defer unix.Close(pfd)
	// The pid may have been reused between the caller's check and PidfdOpen.
	if st, alive := procStartTime(r.PID); !alive || st != r.StartTime {
		return
	}
	_ = unix.PidfdSendSignal(pfd, unix.SIGTERM, nil, 0)
	if !waitPidfd(ctx, pfd, 3*time.Second) {
		_ = unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
		waitPidfd(ctx, pfd, 5*time.Second)
	}
}

// waitPidfd waits until the process of pfd has exited.
func waitPidfd(ctx context.Context, pfd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 || ctx.Err() != nil {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, min(ms, 100))
		if err == nil && n > 0 {
			return true
		}
	}
}
