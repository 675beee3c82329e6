package egress

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/hostname"
)

// MaxEntries is the most entries an [AllowList] holds. Matching costs the
// same whatever the length (a map lookup per label of the name), so the
// cap is not for speed: it bounds what is stored with a sandbox and shown
// by Info, and catches a list pasted by mistake (a block list, a hosts
// file). 100 is ten times Daytona's cap on its CIDR list and room enough
// for the registries, mirrors and APIs of several toolchains.
const MaxEntries = 100

// ErrInvalidEntry is matched (errors.Is) by every error about an entry of
// an allow list.
var ErrInvalidEntry = errors.New("invalid allow list entry")

// AllowList is a validated, immutable list of allowed names and
// wildcards. A nil *AllowList allows nothing. See the package
// documentation for the matching rules.
type AllowList struct {
	entries []string            // canonical, in the order given, without duplicates
	exact   map[string]struct{} // "example.com"
	below   map[string]struct{} // "example.com" for the entry "*.example.com"
}

// ParseAllowList parses a comma-separated list ("example.com,*.example.org"),
// as Daytona's domainAllowList is written. Spaces around entries and empty
// entries (a trailing comma) are ignored.
func ParseAllowList(s string) (*AllowList, error) {
	return NewAllowList(strings.Split(s, ","))
}

// NewAllowList validates entries and returns their list. An entry is a
// name or "*." followed by a name; case and a trailing dot do not matter.
// It refuses, with an error matching [ErrInvalidEntry] that says why:
// IP addresses and CIDRs, URLs, ports, wildcards anywhere but as the whole
// first label, non-ASCII names, malformed names, and more than
// [MaxEntries] entries.
func NewAllowList(entries []string) (*AllowList, error) {
	l := &AllowList{exact: map[string]struct{}{}, below: map[string]struct{}{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		canon, wildcard, err := hostname.ParsePattern(e)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrInvalidEntry, printable(e), err)
		}
		set, key := l.exact, canon
		if wildcard {
			set, key = l.below, strings.TrimPrefix(canon, "*.")
		}
		if _, dup := set[key]; dup {
			continue
		}
		if len(l.entries) == MaxEntries {
			return nil, fmt.Errorf("%w: more than %d entries; allow a parent domain with a wildcard (*.example.com) instead of many of its names", ErrInvalidEntry, MaxEntries)
		}
		set[key] = struct{}{}
		l.entries = append(l.entries, canon)
	}
	return l, nil
}

// Allows reports whether the host name is on the list. It is false for
// anything that is not a valid name, IP literals included.
func (l *AllowList) Allows(host string) bool {
	if l == nil {
		return false
	}
	name, err := canonicalName(host)
	if err != nil {
		return false
	}
	return l.allows(name)
}

// allows is Allows for a canonical name.
func (l *AllowList) allows(name string) bool {
	if l == nil {
		return false
	}
	if _, ok := l.exact[name]; ok {
		return true
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			if _, ok := l.below[name[i+1:]]; ok {
				return true
			}
		}
	}
	return false
}

// Entries returns the entries in canonical form (lower case, no trailing
// dot, no duplicates), in the order given.
func (l *AllowList) Entries() []string {
	if l == nil {
		return nil
	}
	return append([]string(nil), l.entries...)
}

// Len returns the number of entries.
func (l *AllowList) Len() int {
	if l == nil {
		return 0
	}
	return len(l.entries)
}

// String returns the entries comma-separated, in canonical form: what
// ParseAllowList reads back to the same list.
func (l *AllowList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.entries, ",")
}
