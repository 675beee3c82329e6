package hostname

import (
	"errors"
	"strings"
	"testing"
)

// TestParsePattern: names and wildcards in canonical form, and what is
// refused, with a reason.
func TestParsePattern(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM.": "example.com", "*.Example.org": "*.example.org", "a_b.test": "a_b.test", "xn--bcher-kva.de": "xn--bcher-kva.de",
	} {
		if got, wild, err := ParsePattern(in); err != nil || got != want || wild != strings.HasPrefix(want, "*.") {
			t.Errorf("ParsePattern(%q) = %q, %v, %v; want %q", in, got, wild, err, want)
		}
	}
	for in, says := range map[string]string{
		"10.0.0.0/8": "CIDR", "192.168.1.1": "IP address", "0x7f000001": "IP address", "https://example.com": "URL",
		"example.com:443": "port", "*": "bare *", "a.*.example.com": "first label", "bücher.de": "punycode",
		"a..b": "empty label", "-a.test": "starts or ends", "a b.test": "not allowed", strings.Repeat("a", 64) + ".test": "63",
	} {
		if _, _, err := ParsePattern(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParsePattern(%q): %v, want an error saying %q", in, err, says)
		}
	}
}

// TestCanonical: hosts as the egress proxy matches them.
func TestCanonical(t *testing.T) {
	if got, err := Canonical("PyPI.org."); err != nil || got != "pypi.org" {
		t.Errorf("Canonical = %q, %v", got, err)
	}
	for _, in := range []string{"127.1", "[::1]", "2130706433", "1.2.3.4.", "a.123"} {
		if _, err := Canonical(in); !errors.Is(err, ErrIPLiteral) {
			t.Errorf("Canonical(%q): %v, want ErrIPLiteral", in, err)
		}
	}
	if _, err := Canonical("bücher.de"); !errors.Is(err, ErrNonASCII) {
		t.Errorf("non-ASCII: %v", err)
	}
	if got := Printable("a b\x00" + strings.Repeat("c", 300)); len(got) != 255 || !strings.HasPrefix(got, "a?b?c") {
		t.Errorf("Printable = %q", got)
	}
}
