package process

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// buildScript wraps line so that nothing it does leaks into the session
// shell: the exports and the cd happen in a subshell (unless subshell is
// false: the server runs the command stateless), and the command runs
// through eval, so a syntax error fails the command rather than the shell.
func buildScript(line string, env map[string]string, cwd string, stdinNull, subshell bool) (string, error) {
	var b strings.Builder
	if subshell {
		b.WriteByte('(')
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !sandbox.ValidEnvName(k) {
			return "", fmt.Errorf("process: %w: %q (names must match [A-Za-z_][A-Za-z0-9_]*)", sandbox.ErrInvalidEnv, k)
		}
		b.WriteString("export ")
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(sandbox.ShellQuote(env[k]))
		b.WriteString(" && ")
	}
	if cwd != "" {
		b.WriteString("cd ")
		b.WriteString(sandbox.ShellQuote(cwd))
		b.WriteString(" && ")
	}
	b.WriteString("eval ")
	b.WriteString(sandbox.ShellQuote(line))
	if subshell {
		b.WriteByte(')')
	}
	if stdinNull {
		b.WriteString(" </dev/null")
	}
	return b.String(), nil
}

// commandLine returns the command line a session command runs: the line
// buildScript wrapped, or the session command itself when it is not one
// of buildScript's (a process spawned by another client).
func commandLine(script string) string {
	if line, ok := parseScript(script); ok {
		return line
	}
	return script
}

// parseScript undoes buildScript: it returns the command line wrapped
// into script, and false when script is not exactly what buildScript
// makes of some line, environment and directory.
func parseScript(script string) (string, bool) {
	s, subshell := strings.CutPrefix(script, "(")
	env := map[string]string{}
	var cwd string
	var ok bool
	for strings.HasPrefix(s, "export ") {
		var name string
		name, s, ok = strings.Cut(s[len("export "):], "=")
		if !ok {
			return "", false
		}
		if env[name], s, ok = readWord(s, " && "); !ok {
			return "", false
		}
	}
	if rest, found := strings.CutPrefix(s, "cd "); found {
		if cwd, s, ok = readWord(rest, " && "); !ok {
			return "", false
		}
	}
	s, found := strings.CutPrefix(s, "eval ")
	if !found {
		return "", false
	}
	line, _, ok := readWord(s, "")
	if !ok {
		return "", false
	}
	stdinNull := strings.HasSuffix(script, " </dev/null")
	if again, err := buildScript(line, env, cwd, stdinNull, subshell); err != nil || again != script {
		return "", false
	}
	return line, true
}

// readWord reads a word written by sandbox.ShellQuote at the start of s,
// followed by sep (by anything when sep is empty), and returns its value
// and what follows sep. A word is checked by the caller, which quotes the
// value again and compares.
func readWord(s, sep string) (word, rest string, ok bool) {
	if !strings.HasPrefix(s, "'") {
		// Plain: no quote, space or parenthesis.
		end := strings.IndexAny(s, "' )")
		if end < 0 {
			end = len(s)
		}
		word, rest = s[:end], s[end:]
	} else {
		var b strings.Builder
		rest = s[1:]
		for {
			i := strings.IndexByte(rest, '\'')
			if i < 0 {
				return "", "", false
			}
			b.WriteString(rest[:i])
			rest = rest[i+1:]
			after, escaped := strings.CutPrefix(rest, `\''`)
			if !escaped {
				break
			}
			b.WriteByte('\'')
			rest = after
		}
		word = b.String()
	}
	if sep == "" {
		return word, rest, true
	}
	rest, ok = strings.CutPrefix(rest, sep)
	return word, rest, ok
}
