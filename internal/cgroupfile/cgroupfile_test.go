package cgroupfile

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadInt(t *testing.T) {
	for _, c := range []struct {
		content string
		n       int64
		ok      bool
	}{
		{"104857600\n", 104857600, true},
		{"  -1 \n", -1, true},
		{"max\n", 0, false},
		{"50000 100000\n", 0, false},
		{"", 0, false},
	} {
		if n, ok := ReadInt(write(t, c.content)); n != c.n || ok != c.ok {
			t.Errorf("ReadInt(%q) = %d, %v; want %d, %v", c.content, n, ok, c.n, c.ok)
		}
	}
	if n, ok := ReadInt(filepath.Join(t.TempDir(), "missing")); ok || n != 0 {
		t.Errorf("ReadInt(missing) = %d, %v; want 0, false", n, ok)
	}
}

func TestReadKeyed(t *testing.T) {
	got := ReadKeyed(write(t, "file 4096\ninactive_file 1024\nbad x\n\nMemTotal:       16314512 kB\n"))
	want := map[string]int64{"file": 4096, "inactive_file": 1024, "MemTotal": 16314512}
	if !maps.Equal(got, want) {
		t.Errorf("ReadKeyed = %v, want %v", got, want)
	}
	if got := ReadKeyed(filepath.Join(t.TempDir(), "missing")); got == nil || len(got) != 0 {
		t.Errorf("ReadKeyed(missing) = %#v, want an empty map", got)
	}
}
