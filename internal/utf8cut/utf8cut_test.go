package utf8cut

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// Moved from toolbox/process (completeRunes), assertions unchanged.
func TestComplete(t *testing.T) {
	s := []byte("aé日😀")
	for n := 0; n <= len(s); n++ {
		got := Complete(s[:n])
		if !bytes.Equal(s[:got], []byte(string([]rune(string(s[:got]))))) || got > n || n-got > 3 {
			t.Errorf("Complete(%q) = %d", s[:n], got)
		}
	}
	if Complete([]byte{0xff}) != 1 {
		t.Error("invalid byte held back")
	}
}

// A piece ending inside a character holds back exactly its started bytes;
// bytes no continuation can make valid are not held back.
func TestCompleteHoldsBackOnlyAStartedCharacter(t *testing.T) {
	for _, c := range []struct {
		b    string
		want int
	}{
		{"", 0}, {"ab", 2}, {"a\xe6\x97", 1}, {"a\xf0\x9f\x98", 1}, {"a\xf0\x9f\x98\x80", 5},
		{"a\xe6\x28", 3}, {"\x80\x80\x80\x80\x80", 5},
	} {
		if got := Complete([]byte(c.b)); got != c.want {
			t.Errorf("Complete(%q) = %d, want %d", c.b, got, c.want)
		}
	}
}

func TestBefore(t *testing.T) {
	s := strings.Repeat("é€😀a", 10) // runes of 2, 3, 4 and 1 bytes
	for n := -1; n <= len(s)+1; n++ {
		i := Before(s, n)
		if i < 0 || i > max(n, 0) || i > len(s) || !utf8.ValidString(s[:i]) || !utf8.ValidString(s[i:]) {
			t.Fatalf("Before(s, %d) = %d: want an index <= %d between two characters", n, i, n)
		}
		if n >= 0 && n <= len(s) && i < n && utf8.RuneStart(s[n]) {
			t.Fatalf("Before(s, %d) = %d: %d was a character boundary", n, i, n)
		}
	}
}
