package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// maxNameLen is the longest name DNS carries, without its trailing dot.
const maxNameLen = 253

// Why a host is not a name the policy can match. Both are policy
// refusals when a client asks for such a host.
var (
	errIPLiteral = errors.New("an IP address, not a name: only names on the allow list are reachable")
	errNonASCII  = errors.New("not ASCII: give an internationalized name in its punycode (xn--…) form")
)

// canonicalName returns the host name s lower-cased and without its
// trailing dot, or an error saying why s is not a host name. An IP
// literal, in any form a resolver would take for one, is errIPLiteral.
func canonicalName(s string) (string, error) {
	if isIPLiteral(s) {
		return "", errIPLiteral
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", errNonASCII
		}
	}
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if name == "" {
		return "", errors.New("empty name")
	}
	if len(name) > maxNameLen {
		return "", fmt.Errorf("name longer than %d characters", maxNameLen)
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
		return "", errIPLiteral
	}
	return name, nil
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

// isIPLiteral reports whether s is an IP address in a form some resolver
// or client accepts: IPv4 or IPv6 (in brackets or not, with a zone or
// not), or the numeric forms of inet_aton ("2130706433", "0x7f000001",
// "127.1", "0177.0.0.1").
func isIPLiteral(s string) bool {
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

// printable returns s for a log line: at most 255 bytes, every byte that
// is not printable ASCII replaced by '?'. Hosts in refusals come from the
// sandbox.
func printable(s string) string {
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
