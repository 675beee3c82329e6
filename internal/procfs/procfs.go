// Package procfs reads what agentbox needs about processes from Linux's
// /proc file system: the fields of /proc/<pid>/stat, the list of process
// ids, and a process's environment.
//
// It is plain file reading, so it compiles everywhere; on systems without
// /proc every read fails with an error matching fs.ErrNotExist.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Root is where the proc file system is mounted.
const Root = "/proc"

// ErrMalformed is matched (errors.Is) by the error of a stat file that
// cannot be parsed.
var ErrMalformed = errors.New("malformed stat file")

// Stat holds the fields of /proc/<pid>/stat that agentbox uses; see
// proc_pid_stat(5) for their meaning.
type Stat struct {
	// PID is the process id (field 1).
	PID int
	// Comm is the executable's file name without the parentheses around
	// it (field 2). It may contain any byte, spaces and ')' included.
	Comm string
	// State is the process state (field 3): 'R' running, 'S' sleeping,
	// 'D' disk sleep, 'Z' zombie, 'T' stopped, 'X' dead, ….
	State byte
	// PPID is the parent's process id (field 4).
	PPID int
	// PGRP is the process group id (field 5).
	PGRP int
	// Session is the session id (field 6).
	Session int
	// StartTime is when the process started, in clock ticks after boot
	// (field 22). With the PID it identifies a process across pid reuse.
	StartTime uint64
}

// Live reports whether the process runs: it is neither a zombie nor dead.
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// ReadStat reads and parses /proc/<pid>/stat. A process that does not
// exist gives an error matching fs.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(Root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: %w", err)
	}
	s, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: /proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// ParseStat parses the content of a /proc/<pid>/stat file.
func ParseStat(b []byte) (Stat, error) {
	// The command name is in parentheses and may contain anything, ')'
	// included: it ends at the last ')'.
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("%w: no command name in parentheses", ErrMalformed)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("%w: process id: %v", ErrMalformed, err)
	}
	// f[0] is field 3 (state), f[i] field i+3.
	f := bytes.Fields(b[end+1:])
	const startTime = 22 - 3
	if len(f) <= startTime || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: %d fields after the command name, want at least %d", ErrMalformed, len(f), startTime+1)
	}
	s := Stat{PID: pid, Comm: string(b[open+1 : end]), State: f[0][0]}
	for _, x := range []struct {
		dst  *int
		name string
		i    int
	}{{&s.PPID, "ppid", 4 - 3}, {&s.PGRP, "pgrp", 5 - 3}, {&s.Session, "session", 6 - 3}} {
		if *x.dst, err = strconv.Atoi(string(f[x.i])); err != nil {
			return Stat{}, fmt.Errorf("%w: %s: %v", ErrMalformed, x.name, err)
		}
	}
	if s.StartTime, err = strconv.ParseUint(string(f[startTime]), 10, 64); err != nil {
		return Stat{}, fmt.Errorf("%w: starttime: %v", ErrMalformed, err)
	}
	return s, nil
}

// PIDs lists the ids of the processes in /proc, in no particular order.
func PIDs() ([]int, error) {
	d, err := os.Open(Root)
	if err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("procfs: listing %s: %w", Root, err)
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Environ returns the environment pid started with (/proc/<pid>/environ)
// as "KEY=value" entries. Reading another user's process needs the
// privileges of ptrace.
func Environ(pid int) ([]string, error) {
	b, err := os.ReadFile(Root + "/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	var env []string
	for len(b) > 0 {
		entry, rest, _ := bytes.Cut(b, []byte{0})
		if len(entry) > 0 {
			env = append(env, string(entry))
		}
		b = rest
	}
	return env, nil
}
