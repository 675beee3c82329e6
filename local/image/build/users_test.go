package build

import (
	"strings"
	"testing"
)

func TestChownResolution(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"etc/passwd": "root:x:0:0::/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\nbad:x:notanumber:1::/:/bin/sh\n",
		"etc/group":  "root:x:0:\nstaff:x:50:\n",
	})
	v := rootView{layers: []string{dir}}
	for chown, want := range map[string][2]int{"": {0, 0}, "app": {1000, 1000}, "app:staff": {1000, 50}, "7:8": {7, 8}, "app:9": {1000, 9}, "42": {42, 42}} {
		uid, gid, err := v.owner(chown)
		if err != nil || uid != want[0] || gid != want[1] {
			t.Errorf("owner(%q) = %d:%d, %v; want %d:%d", chown, uid, gid, err, want[0], want[1])
		}
	}
	for chown, want := range map[string]string{
		"nobody":      `no "nobody" in the image's /etc/passwd`,
		"app:nogroup": `no "nogroup" in the image's /etc/group`,
		"bad":         "bad id",
		"4294967295":  "out of range",
		"app:":        "empty user or group name",
	} {
		if _, _, err := v.owner(chown); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "--chown="+chown+": ") {
			t.Errorf("owner(%q) error = %v, want %q", chown, err, want)
		}
	}
	if _, _, err := (rootView{layers: []string{t.TempDir()}}).owner("app"); err == nil || !strings.Contains(err.Error(), "has no /etc/passwd") {
		t.Errorf("owner without /etc/passwd: %v", err)
	}
}
