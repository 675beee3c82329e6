package errbody_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/internal/errbody"
)

func TestReadIsBounded(t *testing.T) {
	body := bytes.Repeat([]byte("x"), errbody.Max+100)
	if got := errbody.Read(bytes.NewReader(body)); len(got) != errbody.Max {
		t.Fatalf("Read kept %d bytes of %d, want %d", len(got), len(body), errbody.Max)
	}
	if got := errbody.Read(strings.NewReader("short")); string(got) != "short" {
		t.Fatalf("Read = %q, want the whole short body", got)
	}
}

func TestCutKeepsShortText(t *testing.T) {
	for _, s := range []string{"", "fine", "héllo"} {
		if got := errbody.Cut(s, len(s)); got != s {
			t.Errorf("Cut(%q, %d) = %q, want it unchanged", s, len(s), got)
		}
	}
}

// A cut never splits a rune: whatever the limit falls on, the text kept is
// valid UTF-8, at most n bytes, and the marker counts the bytes left out.
func TestCutOnRuneBoundary(t *testing.T) {
	s := strings.Repeat("é€😀a", 50) // runes of 2, 3, 4 and 1 bytes
	for n := 0; n < 20; n++ {
		got := errbody.Cut(s, n)
		kept, rest, ok := strings.Cut(got, "… (")
		if !ok {
			t.Fatalf("Cut(s, %d) = %q, want a marker", n, got)
		}
		if !utf8.ValidString(got) || len(kept) > n || !strings.HasPrefix(s, kept) {
			t.Errorf("Cut(s, %d) kept %q: want a valid UTF-8 prefix of at most %d bytes", n, kept, n)
		}
		if want := strings.TrimPrefix(s, kept); rest != strconv.Itoa(len(want))+" bytes more)" {
			t.Errorf("Cut(s, %d) marker %q, want %d bytes more", n, rest, len(want))
		}
	}
}
