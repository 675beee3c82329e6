package procfs

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestParseStat(t *testing.T) {
	// A name with spaces and parentheses, as a process may choose.
	line := "4242 (a) b (c)) S 17 4242 4200 34816 4242 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654321 1024 0 18446744073709551615\n"
	s, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, Comm: "a) b (c)", State: 'S', PPID: 17, PGRP: 4242, Session: 4200, StartTime: 987654321}
	if s != want {
		t.Errorf("ParseStat = %+v, want %+v", s, want)
	}
	if !s.Live() {
		t.Error("a sleeping process is not Live")
	}
	for _, st := range []byte{'Z', 'X'} {
		if (Stat{State: st}).Live() {
			t.Errorf("state %c is Live", st)
		}
	}
}

func TestParseStatMalformed(t *testing.T) {
	for _, line := range []string{
		"",
		"12 no-parens S 1 2 3",
		"x (sh) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
		"12 (sh) S 1 2",
		"12 (sh) S one 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
		"12 (sh) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 later",
		"12 (sh) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
	} {
		if _, err := ParseStat([]byte(line)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStat(%q) = %v, want ErrMalformed", line, err)
		}
	}
}

// requireProc skips on systems without /proc.
func requireProc(t *testing.T) {
	t.Helper()
	testenv.Need(t, runtime.GOOS == "linux", runtime.GOOS+" has no /proc")
}

func TestReadStatSelf(t *testing.T) {
	requireProc(t)
	s, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != os.Getpid() || s.PPID != os.Getppid() || !s.Live() || s.StartTime == 0 {
		t.Errorf("ReadStat(self) = %+v; pid %d ppid %d", s, os.Getpid(), os.Getppid())
	}
	pgrp := unix.Getpgrp()
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	if s.PGRP != pgrp || s.Session != sid {
		t.Errorf("ReadStat(self) pgrp %d session %d, want %d %d", s.PGRP, s.Session, pgrp, sid)
	}
}

func TestReadStatMissing(t *testing.T) {
	requireProc(t)
	// A process that ended and was reaped has no /proc entry.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStat(cmd.Process.Pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStat of a reaped process = %v, want fs.ErrNotExist", err)
	}
}

func TestPIDsAndEnviron(t *testing.T) {
	requireProc(t)
	// The shell says when it runs: before its exec, a new process has no
	// environment of its own to read.
	cmd := exec.Command("sh", "-c", "echo ready; read x")
	cmd.Env = []string{"PROCFS_TEST=yes", "B=2"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the shell said %q, %v", line, err)
	}
	pids, err := PIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{os.Getpid(), cmd.Process.Pid} {
		if !slices.Contains(pids, pid) {
			t.Errorf("PIDs lacks %d", pid)
		}
	}
	env, err := Environ(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(env, ",") != "PROCFS_TEST=yes,B=2" {
		t.Errorf("Environ = %q", env)
	}
}
