package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// ShellQuote quotes arg for a POSIX shell exactly as Mastra does: a
// non-empty arg made only of the characters A-Z a-z 0-9 . _ / @ : = - is
// returned unchanged; any other, and the empty string, is wrapped in single
// quotes, each single quote inside written as the four characters:
//
//	'\''
func ShellQuote(arg string) string {
	if arg != "" && isPlain(arg) {
		return arg
	}
	return "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
}

func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '-', c == '/', c == '@', c == ':', c == '=':
		default:
			return false
		}
	}
	return true
}

// CommandLine joins command and args, each arg quoted with ShellQuote. The
// command itself is not quoted.
func CommandLine(command string, args []string) string {
	if len(args) == 0 {
		return command
	}
	var b strings.Builder
	b.WriteString(command)
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(ShellQuote(a))
	}
	return b.String()
}

// ValidEnvName reports whether name can be exported by a POSIX shell:
// [A-Za-z_][A-Za-z0-9_]*.
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidateEnv returns an error matching ErrInvalidEnv naming the first
// invalid name in env (in sorted order), or nil.
func ValidateEnv(env map[string]string) error {
	var bad []string
	for k := range env {
		if !ValidEnvName(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("%w: %q (names must match [A-Za-z_][A-Za-z0-9_]*)", ErrInvalidEnv, bad[0])
}
