// Package cgroupfile reads the value files of Linux cgroups (cgroups(7)):
// files holding one integer, such as memory.current or cpu.cfs_quota_us,
// and files of "key value" lines, such as memory.stat or cpu.stat.
//
// It is plain file reading, so it compiles everywhere; a file that is
// missing or does not hold what is asked reads as absent.
package cgroupfile

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// ReadInt reads the file path holding one integer (surrounding space
// allowed). ok is false when the file cannot be read or holds anything
// else, such as cgroup v2's "max".
func ReadInt(path string) (n int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n, err == nil
}

// ReadKeyed reads the integer values of "key value" lines (memory.stat,
// cpu.stat) or "Key: value kB" lines (/proc/meminfo) of the file path,
// by key; lines whose value is not an integer are left out. A file that
// cannot be read gives an empty map.
func ReadKeyed(path string) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[strings.TrimSuffix(k, ":")] = n
			}
		}
	}
	return out
}
