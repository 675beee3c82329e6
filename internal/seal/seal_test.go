package seal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestSealOpenRoundTrip(t *testing.T) {
	b, err := OpenKeyFile(filepath.Join(t.TempDir(), "k", "key"))
	if err != nil {
		t.Fatal(err)
	}
	s := b.Seal([]byte("sk-value"), []byte("rec"))
	if bytes.Contains(s, []byte("sk-value")) {
		t.Fatal("sealed record holds the plaintext")
	}
	got, err := b.Open(s, []byte("rec"))
	if err != nil || string(got) != "sk-value" {
		t.Fatalf("Open = %q, %v", got, err)
	}
}

func TestOpenRefusesOtherContextOrKey(t *testing.T) {
	dir := t.TempDir()
	a, _ := OpenKeyFile(filepath.Join(dir, "a"))
	b, _ := OpenKeyFile(filepath.Join(dir, "b"))
	s := a.Seal([]byte("v"), []byte("rec"))
	if _, err := a.Open(s, []byte("other")); !errors.Is(err, ErrOpen) {
		t.Errorf("other context: %v, want ErrOpen", err)
	}
	if _, err := b.Open(s, []byte("rec")); !errors.Is(err, ErrOpen) {
		t.Errorf("other key: %v, want ErrOpen", err)
	}
	if _, err := a.Open(s[:5], []byte("rec")); !errors.Is(err, ErrOpen) {
		t.Errorf("short record: %v, want ErrOpen", err)
	}
}

func TestKeyFileIsPrivateAndStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	a, err := OpenKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() != KeySize {
		t.Fatalf("key file: %v %v", st.Mode(), err)
	}
	b, err := OpenKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(a.Seal([]byte("v"), nil), nil); err != nil {
		t.Fatalf("a second open reads another key: %v", err)
	}
}

func TestConcurrentFirstOpenAgrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	boxes := make([]*Box, 8)
	var wg sync.WaitGroup
	for i := range boxes {
		wg.Go(func() {
			b, err := OpenKeyFile(path)
			if err != nil {
				t.Error(err)
			}
			boxes[i] = b
		})
	}
	wg.Wait()
	s := boxes[0].Seal([]byte("v"), nil)
	for i, b := range boxes {
		if b == nil {
			continue
		}
		if _, err := b.Open(s, nil); err != nil {
			t.Errorf("box %d holds another key", i)
		}
	}
}

func TestNotAKeyFileIsRefusedAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	os.WriteFile(path, []byte("not a key"), 0o600)
	if _, err := OpenKeyFile(path); err == nil {
		t.Fatal("a 9-byte file opened as a key")
	}
	if b, _ := os.ReadFile(path); string(b) != "not a key" {
		t.Fatal("the file was overwritten")
	}
}
