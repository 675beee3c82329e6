package netns

import (
	"errors"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestOnThrowawayThread: f runs on a thread other than the main one, and
// its error comes back.
func TestOnThrowawayThread(t *testing.T) {
	want := errors.New("f's error")
	var tid int
	err := OnThrowawayThread(func() error { tid = unix.Gettid(); return want })
	if !errors.Is(err, want) {
		t.Errorf("error %v, want f's", err)
	}
	if tid == unix.Getpid() {
		t.Errorf("f ran on the main thread")
	}
}

// TestRunHere: with no namespace, f runs in this process's namespace.
func TestRunHere(t *testing.T) {
	here := nsIno(t, "/proc/thread-self/ns/net")
	var in uint64
	if err := Run(nil, func() error { in = nsIno(t, "/proc/thread-self/ns/net"); return nil }); err != nil {
		t.Fatal(err)
	}
	if in != here {
		t.Errorf("Run(nil) ran in namespace %d, want this one's %d", in, here)
	}
}

// TestNewHereAndRun: NewHere makes a namespace other than the host's,
// with loopback only, up; Run enters it, and this thread stays where it
// was.
func TestNewHereAndRun(t *testing.T) {
	testenv.NeedRoot(t, "making a network namespace")
	host := nsIno(t, "/proc/thread-self/ns/net")
	var ns *os.File
	if err := OnThrowawayThread(func() (err error) { ns, err = NewHere(); return err }); err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var fi unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &fi); err != nil || fi.Ino == host {
		t.Fatalf("the new namespace is the host's (%v)", err)
	}
	var ifs []net.Interface
	err := Run(ns, func() (err error) {
		if nsIno(t, "/proc/thread-self/ns/net") != fi.Ino {
			return errors.New("Run did not enter the namespace")
		}
		ifs, err = net.Interfaces()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs) != 1 || ifs[0].Name != "lo" || ifs[0].Flags&net.FlagUp == 0 {
		t.Errorf("interfaces of the new namespace: %+v, want lo, up", ifs)
	}
	if nsIno(t, "/proc/thread-self/ns/net") != host {
		t.Errorf("the test's thread left the host's namespace")
	}
}

func nsIno(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
