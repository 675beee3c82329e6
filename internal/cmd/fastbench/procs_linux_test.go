package main

import "testing"

func TestParseStat(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime prio nice threads itreal starttime ...
	s := "42 (agentbox-init x) S 7 42 42 0 -1 4194560 100 0 0 0 11 12 13 14 20 0 3 0 98765 1000 10"
	st, err := parseStat(s)
	if err != nil || st.PPID != 7 || st.CPU != 50 || st.Start != 98765 {
		t.Errorf("parseStat = %+v, %v; want ppid 7, cpu 50, start 98765", st, err)
	}
	if _, err := parseStat("42 (x) S 1"); err == nil {
		t.Error("parseStat of a short line: no error")
	}
}
