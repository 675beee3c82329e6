package egress

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestAllowListMatching(t *testing.T) {
	l, err := ParseAllowList(" Example.COM. , *.wild.test,api.example.org,,*.Deep.Example.NET ")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.String(); got != "example.com,*.wild.test,api.example.org,*.deep.example.net" {
		t.Errorf("canonical form %q", got)
	}
	for _, c := range []struct {
		host string
		want bool
	}{
		{"example.com", true},
		{"EXAMPLE.com", true},
		{"example.com.", true},          // trailing dot
		{"www.example.com", false},      // an exact entry does not cover names below it
		{"a.wild.test", true},           // one label below
		{"a.b.c.wild.test", true},       // any depth
		{"A.Wild.Test.", true},          // case, trailing dot
		{"wild.test", false},            // a wildcard does not cover the name itself (E2B's rule)
		{"notwild.test", false},         // a suffix that is not a label boundary
		{"a.wild.test.evil.com", false}, // the list name as a prefix
		{"wild.test.evil.com", false},
		{"x.deep.example.net", true},
		{"deep.example.net", false},
		{"example.net", false},
		{"api.example.org", true},
		{"api.example.org.evil", false},
		{"", false},
		{".", false},
		{"example.com..", false},
		{"127.0.0.1", false},
		{"[::1]", false},
		{"xn--bcher-kva.example", false},
		{"bücher.example", false},
	} {
		if got := l.Allows(c.host); got != c.want {
			t.Errorf("Allows(%q) = %v, want %v", c.host, got, c.want)
		}
	}
	var nilList *AllowList
	if nilList.Allows("example.com") || nilList.Len() != 0 || nilList.String() != "" {
		t.Error("a nil list allows something")
	}
}

func TestAllowListPunycode(t *testing.T) {
	l, err := ParseAllowList("xn--bcher-kva.example,*.xn--mnchen-3ya.de")
	if err != nil {
		t.Fatal(err)
	}
	if !l.Allows("XN--BCHER-KVA.example") || !l.Allows("www.xn--mnchen-3ya.de") {
		t.Error("punycode names are not matched")
	}
	_, err = ParseAllowList("bücher.example")
	if err == nil || !strings.Contains(err.Error(), "punycode") {
		t.Errorf("a non-ASCII entry: %v, want an error pointing to punycode", err)
	}
}

func TestAllowListRejects(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, c := range []struct {
		entry, says string
	}{
		{"*", "bare *"},
		{"*.", "empty"},
		{"**.example.com", "whole first label"},
		{"a.*.example.com", "whole first label"},
		{"*example.com", "whole first label"},
		{"example.*", "whole first label"},
		{"https://example.com", "not a URL"},
		{"example.com/path", "not a URL"},
		{"10.0.0.0/8", "CIDR"},
		{"example.com:443", "without a port"},
		{"10.0.0.1", "IP address"},
		{"::1", "IP address"},
		{"[::1]", "IP address"},
		{"2130706433", "IP address"},
		{"0x7f000001", "IP address"},
		{"127.1", "IP address"},
		{"example.123", "IP address"}, // numeric top-level domain
		{"a..b", "empty label"},
		{".example.com", "empty label"},
		{"-a.example.com", "starts or ends with '-'"},
		{"a-.example.com", "starts or ends with '-'"},
		{"a b.example.com", "not allowed"},
		{"a@b.example.com", "not allowed"},
		{long + "a.example.com", "63"},
		{strings.Repeat(long+".", 4) + "com", "253"},
		{"bücher.de", "punycode"},
	} {
		_, err := ParseAllowList("ok.example," + c.entry)
		if err == nil {
			t.Errorf("%q accepted", c.entry)
			continue
		}
		if !errors.Is(err, ErrInvalidEntry) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v, want ErrInvalidEntry saying %q", c.entry, err, c.says)
		}
	}
	// The longest name DNS carries is fine.
	name := strings.Repeat(long+".", 3) + strings.Repeat("b", 61)
	if len(name) != maxNameLen {
		t.Fatalf("test name is %d long", len(name))
	}
	if _, err := ParseAllowList(name); err != nil {
		t.Errorf("a %d-character name: %v", len(name), err)
	}
}

func TestAllowListCap(t *testing.T) {
	var entries []string
	for i := 0; i < MaxEntries; i++ {
		entries = append(entries, fmt.Sprintf("host%d.example", i))
	}
	l, err := NewAllowList(append(entries, "host0.example", "HOST1.example."))
	if err != nil || l.Len() != MaxEntries {
		t.Fatalf("%d entries (with duplicates): %v, len %d", MaxEntries, err, l.Len())
	}
	_, err = NewAllowList(append(entries, "one-more.example"))
	if !errors.Is(err, ErrInvalidEntry) || !strings.Contains(err.Error(), fmt.Sprint(MaxEntries)) {
		t.Errorf("%d entries: %v, want an error naming the cap", MaxEntries+1, err)
	}
}

func TestIsIPLiteral(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0X7F.0.0.1", "0177.0.0.1", "::1", "[::1]", "fe80::1%eth0", "::ffff:127.0.0.1", "1.2.3.4.", "0x"} {
		if !isIPLiteral(s) {
			t.Errorf("isIPLiteral(%q) = false", s)
		}
	}
	for _, s := range []string{"example.com", "1.2.3.4.5", "0xg", "1e100.net", "a.1", ""} {
		if isIPLiteral(s) {
			t.Errorf("isIPLiteral(%q) = true", s)
		}
	}
}
