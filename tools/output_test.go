package tools

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	more := func(head int) string { return "MORE" }
	if got, cut := bound("short", 100, more); got != "short" || cut {
		t.Fatalf("short text changed: %q %v", got, cut)
	}
	// Multi-byte runes and no line breaks: the cuts stay on rune starts.
	s := strings.Repeat("é", 5000)
	got, cut := bound(s, 1000, more)
	if !cut || !utf8.ValidString(got) || !strings.Contains(got, "the output has 10000 bytes") || !strings.Contains(got, "MORE") {
		t.Fatalf("bound: cut=%v valid=%v %q", cut, utf8.ValidString(got), got)
	}
	if len(got) > 1000+200 {
		t.Errorf("bounded to %d bytes, want about 1000", len(got))
	}
	// Lines: the cuts fall on line starts.
	var b strings.Builder
	for range 1000 {
		b.WriteString("0123456789\n")
	}
	got, _ = bound(b.String(), 1000, more)
	head, tail, ok := strings.Cut(got, "\n[…")
	if !ok || !strings.HasSuffix(head, "0123456789\n") || !strings.HasPrefix(tail[strings.Index(tail, "]\n")+2:], "0123456789\n") {
		t.Fatalf("cuts not on lines: %q", got)
	}
}

func TestStripANSI(t *testing.T) {
	in := "\x1b[1;31mred\x1b[0m plain \x1b]0;title\x07end\x1b[2K"
	if got := stripANSI(in); got != "red plain end" {
		t.Fatalf("stripANSI = %q", got)
	}
}
