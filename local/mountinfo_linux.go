package local

import (
	"bufio"
	"os"
	"strings"
)

// mountEntry is a line of /proc/self/mountinfo.
type mountEntry struct {
	mountPoint   string // field 5, unescaped
	fsType       string // first field after " - "
	superOptions string // third field after " - "
}

// readMountinfo parses /proc/self/mountinfo, e.g.
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func readMountinfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		pre, post := strings.Fields(line[:sep]), strings.Fields(line[sep+3:])
		if len(pre) < 5 || len(post) < 3 {
			continue
		}
		out = append(out, mountEntry{mountPoint: unescapeMount(pre[4]), fsType: post[0], superOptions: post[2]})
	}
	return out, sc.Err()
}

// unescapeMount decodes the octal escapes of a mountinfo path.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
