package build

import (
	"fmt"
	"strings"
)

// expander substitutes variables in the words of instructions as Docker
// does: $NAME, ${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:+word},
// ${NAME+word}, ${NAME:?message}, ${NAME?message}; single quotes keep
// their text as is, double quotes allow substitution, the escape
// character takes the next one literally; quotes are removed.
type expander struct {
	escape rune
	lookup func(name string) (string, bool)
}

// word returns w with its variables substituted and quotes removed.
func (x *expander) word(w string) (string, error) {
	rs := []rune(w)
	var out strings.Builder
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == x.escape:
			if i+1 < len(rs) {
				i++
				out.WriteRune(rs[i])
			}
		case r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return "", fmt.Errorf("unterminated single quote in %q", w)
			}
			out.WriteString(string(rs[i+1 : j]))
			i = j
		case r == '"':
			j, err := x.doubleQuoted(rs, i+1, &out)
			if err != nil {
				return "", fmt.Errorf("%w in %q", err, w)
			}
			i = j
		case r == '$':
			j, err := x.variable(rs, i, &out)
			if err != nil {
				return "", err
			}
			i = j
		default:
			out.WriteRune(r)
		}
	}
	return out.String(), nil
}

// doubleQuoted writes the double-quoted text starting at rs[i] (after the
// opening quote) and returns the index of the closing quote.
func (x *expander) doubleQuoted(rs []rune, i int, out *strings.Builder) (int, error) {
	for ; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '"':
			return i, nil
		case r == x.escape && i+1 < len(rs):
			// As in a POSIX shell, only \" \$ and \\ lose their backslash.
			if n := rs[i+1]; n == '"' || n == '$' || n == x.escape {
				i++
				out.WriteRune(n)
			} else {
				out.WriteRune(r)
			}
		case r == '$':
			j, err := x.variable(rs, i, out)
			if err != nil {
				return 0, err
			}
			i = j
		default:
			out.WriteRune(r)
		}
	}
	return 0, fmt.Errorf("unterminated double quote")
}

// variable writes the value of the variable reference starting at rs[i]
// ('$') and returns the index of its last rune. A '$' not followed by a
// name is itself.
func (x *expander) variable(rs []rune, i int, out *strings.Builder) (int, error) {
	if i+1 < len(rs) && rs[i+1] == '{' {
		end := matchingBrace(rs, i+2)
		if end < 0 {
			return 0, fmt.Errorf("missing '}' in %q", string(rs))
		}
		v, err := x.braced(string(rs[i+2 : end]))
		if err != nil {
			return 0, err
		}
		out.WriteString(v)
		return end, nil
	}
	j := i + 1
	for j < len(rs) && isNameRune(rs[j], j == i+1) {
		j++
	}
	if j == i+1 {
		out.WriteRune('$')
		return i, nil
	}
	v, _ := x.lookup(string(rs[i+1 : j]))
	out.WriteString(v)
	return j - 1, nil
}

// matchingBrace returns the index of the '}' closing a ${ whose content
// starts at i, or -1.
func matchingBrace(rs []rune, i int) int {
	depth := 1
	for ; i < len(rs); i++ {
		switch rs[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// braced evaluates the inside of ${…}.
func (x *expander) braced(s string) (string, error) {
	rs := []rune(s)
	n := 0
	for n < len(rs) && isNameRune(rs[n], n == 0) {
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("bad substitution ${%s}: a variable name must match [A-Za-z_][A-Za-z0-9_]*", s)
	}
	name, op := string(rs[:n]), string(rs[n:])
	val, set := x.lookup(name)
	if op == "" {
		return val, nil
	}
	colon := strings.HasPrefix(op, ":")
	mod := strings.TrimPrefix(op, ":")
	if mod == "" {
		return "", fmt.Errorf("bad substitution ${%s}", s)
	}
	present := set && (!colon || val != "")
	word := func() (string, error) { return x.word(mod[1:]) }
	switch mod[0] {
	case '-':
		if present {
			return val, nil
		}
		return word()
	case '+':
		if present {
			return word()
		}
		return "", nil
	case '?':
		if present {
			return val, nil
		}
		msg, err := word()
		if err != nil {
			return "", err
		}
		if msg == "" {
			msg = "is not set"
		}
		return "", fmt.Errorf("variable %s: %s", name, msg)
	}
	return "", fmt.Errorf("bad substitution ${%s}: supported forms are ${NAME}, ${NAME:-word}, ${NAME:+word}, ${NAME:?message} (and without the colon)", s)
}

func isNameRune(r rune, first bool) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || !first && r >= '0' && r <= '9'
}
