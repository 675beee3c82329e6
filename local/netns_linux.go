package local

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local/internal/netns"
)

// The network namespace helpers are package netns's (throwaway threads,
// entering and making namespaces); local names them as its callers
// always did.
var (
	onThrowawayThread = netns.OnThrowawayThread
	inNetns           = netns.Run
	newNetnsHere      = netns.NewHere
	loopbackUp        = netns.LoopbackUp
)

// openInitNetns opens the network namespace of the running init r.
func openInitNetns(r *initRecord) (*os.File, error) {
	if r == nil {
		return nil, errors.New("the sandbox does not run")
	}
	pfd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return nil, fmt.Errorf("the sandbox's init: %w", err)
	}
	defer unix.Close(pfd)
	if st, ok := procStartTime(r.PID); !ok || st != r.StartTime {
		return nil, errors.New("the sandbox's init has ended")
	}
	f, err := os.Open("/proc/" + strconv.Itoa(r.PID) + "/ns/net")
	if err != nil {
		return nil, err
	}
	// The pid still names the init if its pidfd does not report an end.
	if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}, 0); n > 0 {
		f.Close()
		return nil, errors.New("the sandbox's init has ended")
	}
	return f, nil
}
