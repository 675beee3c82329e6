package local

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The numbers of Docker's capability set are Linux's.
func TestDockerCapabilityNumbers(t *testing.T) {
	want := map[string]int{
		"CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "CAP_FSETID": unix.CAP_FSETID,
		"CAP_FOWNER": unix.CAP_FOWNER, "CAP_MKNOD": unix.CAP_MKNOD, "CAP_NET_RAW": unix.CAP_NET_RAW,
		"CAP_SETGID": unix.CAP_SETGID, "CAP_SETUID": unix.CAP_SETUID, "CAP_SETFCAP": unix.CAP_SETFCAP,
		"CAP_SETPCAP": unix.CAP_SETPCAP, "CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE,
		"CAP_SYS_CHROOT": unix.CAP_SYS_CHROOT, "CAP_KILL": unix.CAP_KILL, "CAP_AUDIT_WRITE": unix.CAP_AUDIT_WRITE,
	}
	if len(dockerCapabilities) != len(want) {
		t.Errorf("%d capabilities, want Docker's %d", len(dockerCapabilities), len(want))
	}
	for _, c := range dockerCapabilities {
		if v, ok := want[c.name]; !ok || v != c.value {
			t.Errorf("%s = %d, want %d (known: %v)", c.name, c.value, v, ok)
		}
	}
}
