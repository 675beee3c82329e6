//go:build linux

package fuse

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestFUSEOptions: the supervisor's checks of a FUSE mount's options, as
// a caller other than root sees them: fd= must name a /dev/fuse
// descriptor of the caller (it becomes the supervisor's duplicate), and
// user_id= and group_id= must be the caller's own. (The sandbox tests
// run as the sandbox's root; this one plays a caller of uid 1000 with
// this test process as the caller.)
func TestFUSEOptions(t *testing.T) {
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		testenv.Skipf(t, "no usable /dev/fuse: %v", err)
	}
	defer dev.Close()
	null, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	fd := strconv.Itoa(int(dev.Fd()))
	for _, tc := range []struct {
		uid, gid int
		data     string
		want     error
	}{
		{1000, 1000, "fd=" + fd + ",rootmode=40000,user_id=1000,group_id=1000", nil},
		{1000, 1000, "fd=" + fd + ",rootmode=40000,user_id=0,group_id=1000", unix.EPERM},
		{1000, 1000, "fd=" + fd + ",rootmode=40000,user_id=1000,group_id=0", unix.EPERM},
		{0, 0, "fd=" + fd + ",rootmode=40000,user_id=1000,group_id=1000", nil},
		{0, 0, "fd=" + strconv.Itoa(int(null.Fd())) + ",rootmode=40000,user_id=0,group_id=0", unix.EINVAL},
		{0, 0, "rootmode=40000,user_id=0,group_id=0", unix.EINVAL},
		{0, 0, "fd=" + fd + ",fd=" + fd + ",rootmode=40000", unix.EINVAL},
		{0, 0, "fd=999999,rootmode=40000", unix.EINVAL},
	} {
		c := &fuseCaller{pid: os.Getpid(), pidfd: pidfd, uid: tc.uid, gid: tc.gid}
		opts, dup, err := c.fuseOptions(tc.data)
		if !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("uid %d, %q: %v, want %v", tc.uid, tc.data, err, tc.want)
		}
		if err != nil {
			continue
		}
		if !strings.HasPrefix(opts, "fd="+strconv.Itoa(dup)+",") || dup == int(dev.Fd()) {
			t.Errorf("uid %d, %q: options %q with the duplicate %d", tc.uid, tc.data, opts, dup)
		}
		unix.Close(dup)
	}
}
