// Package hostname checks host names and the domain patterns of network
// allow lists ("example.com", "*.example.com"): the one reading of a name
// that the sandbox spec (package sandbox), which validates allow lists,
// and the egress proxy (package internal/egress), which matches the
// names a sandbox asks for, share.
package hostname

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// MaxNameLen is the longest name DNS carries, without its trailing dot.
const MaxNameLen = 253

// Why a host is not a name a pattern can match.
var (
	// ErrIPLiteral: the host is an IP address in some form a resolver
	// takes for one.
	ErrIPLiteral = errors.New("an IP address, not a name: only names on the allow list are reachable")
	// ErrNonASCII: the host is not ASCII.
	ErrNonASCII = errors.New("not ASCII: give an internationalized name in its punycode (xn--…) form")
)

// Canonical returns the host name s lower-cased and without its trailing
// dot, or an error saying why s is not a host name. An IP literal, in any
// form a resolver would take for one, is ErrIPLiteral.
func Canonical(s string) (string, error) {
	if IsIPLiteral(s) {
		return "", ErrIPLiteral
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", ErrNonASCII
		}
	}
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if name == "" {
		return "", errors.New("empty name")
	}
	if len(name) > MaxNameLen {
		return "", fmt.Errorf("name longer than %d characters", MaxNameLen)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return "", err
		}
	}
	if allDigits(labels[len(labels)-1]) {
		// No top-level domain is numeric (RFC 3696 §2); resolvers read
		// such names as addresses.
		return "", ErrIPLiteral
	}
	return name, nil
}

// ParsePattern returns the canonical form of the allow list entry e (a
// name, or "*." followed by a name: every name below it) and whether it
// is a wildcard, or why it is not a pattern.
func ParsePattern(e string) (canon string, wildcard bool, err error) {
	switch {
	case strings.Contains(e, "://") || strings.Contains(e, "/"):
		return "", false, errors.New("give a name, not a URL, a path or a CIDR")
	case e == "*":
		return "", false, errors.New("a bare * would allow every name; list the names, or wildcards such as *.example.com")
	case strings.HasPrefix(e, "*."):
		wildcard = true
		e = e[2:]
	}
	if strings.Contains(e, "*") {
		return "", false, errors.New("a wildcard must be the whole first label, as in *.example.com")
	}
	if strings.Contains(e, ":") && !IsIPLiteral(e) {
		return "", false, errors.New("give a name without a port: every port of an allowed name is allowed")
	}
	name, err := Canonical(e)
	if errors.Is(err, ErrIPLiteral) {
		return "", false, errors.New("an IP address, not a name: a domain allow list holds names only")
	}
	if err != nil {
		return "", false, err
	}
	if wildcard {
		return "*." + name, true, nil
	}
	return name, false, nil
}

// checkLabel reports what is wrong with the label l of a lower-cased
// name: letters, digits, '-' (not first or last) and '_', 1 to 63 of
// them.
func checkLabel(l string) error {
	if l == "" {
		return errors.New("empty label (two dots in a row, or a leading dot)")
	}
	if len(l) > 63 {
		return errors.New("label longer than 63 characters")
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			continue
		}
		return fmt.Errorf("character %q is not allowed in a name", c)
	}
	return nil
}

// IsIPLiteral reports whether s is an IP address in a form some resolver
// or client accepts: IPv4 or IPv6 (in brackets or not, with a zone or
// not), or the numeric forms of inet_aton ("2130706433", "0x7f000001",
// "127.1", "0177.0.0.1").
func IsIPLiteral(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		if !numericPart(p) {
			return false
		}
	}
	return true
}

// numericPart reports whether p is a number as inet_aton reads one:
// decimal, octal (leading 0) or hexadecimal (leading 0x).
func numericPart(p string) bool {
	if len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') {
		for i := 2; i < len(p); i++ {
			c := p[i] | 0x20
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	return allDigits(p)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Printable returns s for a log line or an error message: at most 255
// bytes, every byte that is not printable ASCII replaced by '?'. Hosts
// and allow list entries may come from an untrusted sandbox or client.
func Printable(s string) string {
	if len(s) > 255 {
		s = s[:255]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x21 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}
