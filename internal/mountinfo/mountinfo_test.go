package mountinfo

import (
	"errors"
	"io/fs"
	"runtime"
	"strings"
	"testing"
)

const table = `22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
40 22 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate
41 22 0:31 /user.slice /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
50 36 0:40 / /home/a\040b\011c\134d rw - fuse.sshfs me@host:/x\040y rw,user_id=1000,group_id=1000
garbage line without separator
51 36 0:41 / - tmpfs
x 36 0:42 / /bad rw - tmpfs tmpfs rw
`

func TestParse(t *testing.T) {
	ms, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{ID: 22, Parent: 1, Root: "/", MountPoint: "/proc", Options: "rw,nosuid,nodev,noexec,relatime", FSType: "proc", Source: "proc", SuperOptions: "rw"},
		{ID: 36, Parent: 35, Root: "/mnt1", MountPoint: "/mnt2", Options: "rw,noatime", FSType: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"},
		{ID: 40, Parent: 22, Root: "/", MountPoint: "/sys/fs/cgroup", Options: "rw,nosuid", FSType: "cgroup2", Source: "cgroup2", SuperOptions: "rw,nsdelegate"},
		{ID: 41, Parent: 22, Root: "/user.slice", MountPoint: "/sys/fs/cgroup/cpu,cpuacct", Options: "rw", FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,cpu,cpuacct"},
		{ID: 50, Parent: 36, Root: "/", MountPoint: "/home/a b\tc\\d", Options: "rw", FSType: "fuse.sshfs", Source: "me@host:/x y", SuperOptions: "rw,user_id=1000,group_id=1000"},
	}
	if len(ms) != len(want) {
		t.Fatalf("Parse: %d mounts, want %d: %+v", len(ms), len(want), ms)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mount %d:\n got %+v\nwant %+v", i, ms[i], want[i])
		}
	}
}

func TestOptions(t *testing.T) {
	opts := "rw,cpu,cpuacct,user_id=1000"
	for _, c := range []struct {
		opt  string
		want bool
	}{{"cpu", true}, {"cpuacct", true}, {"memory", false}, {"cp", false}, {"user_id", false}} {
		if got := HasOption(opts, c.opt); got != c.want {
			t.Errorf("HasOption(%q, %q) = %v, want %v", opts, c.opt, got, c.want)
		}
	}
	if v, ok := Option(opts, "user_id"); !ok || v != "1000" {
		t.Errorf("Option(user_id) = %q, %v; want 1000, true", v, ok)
	}
	if v, ok := Option(opts, "group_id"); ok {
		t.Errorf("Option(group_id) = %q, true; want absent", v)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/plain`: "/plain", `/a\040b`: "/a b", `\134\012`: "\\\n"} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, err := Read(Self)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Read(%s) on %s: %v, want an error matching fs.ErrNotExist", Self, runtime.GOOS, err)
		}
		return
	}
	ms, err := Read(Self)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range ms {
		if m.MountPoint == "/" {
			found = true
		}
		if m.ID == 0 || m.FSType == "" {
			t.Errorf("incomplete mount %+v", m)
		}
	}
	if !found {
		t.Errorf("no mount at / in %s %+v", Self, ms)
	}
}
