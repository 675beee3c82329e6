package local

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is what this package reads of /proc/<pid>/stat.
type procStat struct {
	State     string // field 3: R, S, D, Z, X, …
	PPID      int    // field 4
	StartTime uint64 // field 22, in clock ticks since boot
}

// readProcStat parses /proc/<pid>/stat (pid as a string, as listed in
// /proc). It is the package's one parser of that file.
func readProcStat(pid string) (procStat, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold anything,
	// ')' included: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("/proc/" + pid + "/stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); start time is field 22.
	if len(f) < 20 {
		return procStat{}, errors.New("/proc/" + pid + "/stat: too few fields")
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, err
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, err
	}
	return procStat{State: f[0], PPID: ppid, StartTime: st}, nil
}

// zombie reports whether the process has ended and waits to be reaped (or
// is being reaped).
func (s procStat) zombie() bool { return s.State == "Z" || s.State == "X" }

// procStartTime returns the start time of pid and whether it is alive
// (exists and is not a zombie).
func procStartTime(pid int) (uint64, bool) {
	s, err := readProcStat(strconv.Itoa(pid))
	if err != nil {
		return 0, false
	}
	return s.StartTime, !s.zombie()
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
