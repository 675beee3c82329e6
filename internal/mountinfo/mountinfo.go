// Package mountinfo parses Linux's mount tables, /proc/<pid>/mountinfo
// (proc(5)): one line per mount, such as
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// It is plain text parsing, so it compiles everywhere; on systems without
// /proc, Read fails with an error matching fs.ErrNotExist.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Self is the mount table of the calling process's mount namespace.
const Self = "/proc/self/mountinfo"

// Mount is one line of a mount table. Paths are unescaped.
type Mount struct {
	ID           uint64 // mount id (field 1)
	Parent       uint64 // the parent's mount id (field 2)
	Root         string // the folder of the file system mounted here (field 4)
	MountPoint   string // where it is mounted (field 5)
	Options      string // per-mount options (field 6)
	FSType       string // file system type, the first field after " - "
	Source       string // mount source, the second field after " - "
	SuperOptions string // per-superblock options, the third field after " - "
}

// Read parses the mount table in the file path, such as Self or
// /proc/<pid>/mountinfo.
func Read(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ms, nil
}

// Parse parses a mount table. It skips lines it cannot read (too few
// fields, no " - " separator); an error is one of reading r.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if m, ok := parseLine(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseLine parses one line of a mount table.
func parseLine(line string) (Mount, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	a, b := strings.Fields(pre), strings.Fields(post)
	if !ok || len(a) < 5 || len(b) < 3 {
		return Mount{}, false
	}
	id, err1 := strconv.ParseUint(a[0], 10, 64)
	parent, err2 := strconv.ParseUint(a[1], 10, 64)
	if err1 != nil || err2 != nil {
		return Mount{}, false
	}
	m := Mount{
		ID: id, Parent: parent, Root: Unescape(a[3]), MountPoint: Unescape(a[4]),
		FSType: b[0], Source: Unescape(b[1]), SuperOptions: b[2],
	}
	if len(a) > 5 {
		m.Options = a[5]
	}
	return m, true
}

// Unescape decodes the octal escapes (\040 for a space, \011, \012, \134)
// the kernel writes in the paths of a mount table.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return unescaper.Replace(s)
}

var unescaper = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

// HasOption reports whether the comma-separated options opts hold opt,
// such as "memory" in a cgroup v1 mount's super options.
func HasOption(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// Option returns the value of the option key ("user_id" in
// "rw,user_id=1000") in the comma-separated options opts.
func Option(opts, key string) (value string, ok bool) {
	for o := range strings.SplitSeq(opts, ",") {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v, true
		}
	}
	return "", false
}
