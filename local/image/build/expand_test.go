package build

import (
	"strings"
	"testing"
)

func TestExpandWord(t *testing.T) {
	vars := map[string]string{"A": "apple", "EMPTY": "", "P": "/usr/bin"}
	x := &expander{escape: '\\', lookup: func(n string) (string, bool) { v, ok := vars[n]; return v, ok }}
	for _, tc := range []struct{ in, want string }{
		{"$A", "apple"},
		{"${A}s", "apples"},
		{"$A$A", "appleapple"},
		{"$UNSET-x", "-x"},
		{"${UNSET:-def}", "def"},
		{"${EMPTY:-def}", "def"},
		{"${EMPTY-def}", ""},
		{"${A:+set}", "set"},
		{"${UNSET:+set}", ""},
		{"${EMPTY+set}", "set"},
		{"${UNSET:-${A}}", "apple"},
		{`\$A`, "$A"},
		{`'$A'`, "$A"},
		{`"$A pie"`, "apple pie"},
		{`"a\"b"`, `a"b`},
		{`"a\nb"`, `a\nb`},
		{`a\ b`, "a b"},
		{"$", "$"},
		{"a$-b", "a$-b"},
		{"$P:/bin", "/usr/bin:/bin"},
	} {
		got, err := x.word(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("word(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"${A", "missing '}'"},
		{"'abc", "unterminated single quote"},
		{`"abc`, "unterminated double quote"},
		{"${UNSET:?give UNSET}", "variable UNSET: give UNSET"},
		{"${A/x/y}", "bad substitution"},
		{"${}", "bad substitution"},
	} {
		_, err := x.word(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("word(%q) error = %v, want %q", tc.in, err, tc.want)
		}
	}
}
