package process

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// setupScript returns the exports and the cd that put a command in its
// environment and working directory, joined with " && " (empty when there
// are none).
func setupScript(env map[string]string, cwd string) (string, error) {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !sandbox.ValidEnvName(k) {
			return "", fmt.Errorf("process: %w: %q (names must match [A-Za-z_][A-Za-z0-9_]*)", sandbox.ErrInvalidEnv, k)
		}
		if b.Len() > 0 {
			b.WriteString(" && ")
		}
		b.WriteString("export ")
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(sandbox.ShellQuote(env[k]))
	}
	if cwd != "" {
		if b.Len() > 0 {
			b.WriteString(" && ")
		}
		b.WriteString("cd ")
		b.WriteString(sandbox.ShellQuote(cwd))
	}
	return b.String(), nil
}

// buildScript wraps line for a session shell that runs one command after
// the other, Daytona's: nothing it does leaks into the session shell, as
// the exports and the cd happen in a subshell, and the command runs
// through eval, so a syntax error fails the command rather than the shell:
//
//	(export K='v' && cd '/dir' && eval '<line>') </dev/null
func buildScript(line string, env map[string]string, cwd string, stdinNull bool) (string, error) {
	setup, err := setupScript(env, cwd)
	if err != nil {
		return "", err
	}
	return evalForm(line, setup, stdinNull), nil
}

func evalForm(line, setup string, stdinNull bool) string {
	var b strings.Builder
	b.WriteByte('(')
	if setup != "" {
		b.WriteString(setup)
		b.WriteString(" && ")
	}
	b.WriteString("eval ")
	b.WriteString(sandbox.ShellQuote(line))
	b.WriteByte(')')
	if stdinNull {
		b.WriteString(" </dev/null")
	}
	return b.String()
}

// buildFresh wraps line for agentbox's toolbox server, which runs every
// session command in a fresh shell of its own, through eval (so a syntax
// error fails the command, never the session): the line follows the setup
// on the same line, unquoted,
//
//	export K='v' && cd '/dir' || exit; exec </dev/null; <line>
//
// so that the line's own line numbers are the shell's: errors and $LINENO
// read as with `bash -c '<line>'` (a quoted line after eval is numbered
// from the line where the eval command ends, its last).
func buildFresh(line string, env map[string]string, cwd string, stdinNull bool) (string, error) {
	setup, err := setupScript(env, cwd)
	if err != nil {
		return "", err
	}
	return freshForm(line, setup, stdinNull), nil
}

// freshPrefix ends a non-empty setup in the fresh form.
const freshPrefix = " || exit; "

// freshStdin redirects the rest of the fresh form's input from /dev/null.
const freshStdin = "exec </dev/null; "

func freshForm(line, setup string, stdinNull bool) string {
	var b strings.Builder
	if setup != "" {
		b.WriteString(setup)
		b.WriteString(freshPrefix)
	}
	if stdinNull {
		b.WriteString(freshStdin)
	}
	b.WriteString(line)
	return b.String()
}

// commandLine returns the command line a session command runs: the line
// buildScript or buildFresh wrapped, or the session command itself when
// it is not one of theirs (a process spawned by another client).
func commandLine(script string) string {
	if line, ok := parseScript(script); ok {
		return line
	}
	return script
}

// parseScript undoes buildScript and buildFresh: it returns the command
// line wrapped into script, and false when script is not exactly what
// they make of some line, environment and directory. A fresh form with
// neither setup nor redirection is the line itself (false). A line that is
// not wrapped but begins with what looks like a setup of its own followed
// by " || exit; " reads as wrapped.
func parseScript(script string) (string, bool) {
	s, subshell := strings.CutPrefix(script, "(")
	setup, rest := readSetup(s)
	if subshell {
		if setup != "" {
			rest, _ = strings.CutPrefix(rest, " && ")
		}
		rest, found := strings.CutPrefix(rest, "eval ")
		if !found {
			return "", false
		}
		line, _, ok := readWord(rest, "")
		stdinNull := strings.HasSuffix(script, " </dev/null")
		if !ok || evalForm(line, setup, stdinNull) != script {
			return "", false
		}
		return line, true
	}
	if setup != "" {
		var ok bool
		if rest, ok = strings.CutPrefix(rest, freshPrefix); !ok {
			return "", false
		}
	}
	line, stdinNull := strings.CutPrefix(rest, freshStdin)
	if setup == "" && !stdinNull {
		return "", false
	}
	return line, freshForm(line, setup, stdinNull) == script
}

// readSetup returns the longest prefix of s made of setupScript's parts
// (exports and a cd, joined with " && "), and what follows it. The parts
// are not checked: parseScript builds the script again and compares.
func readSetup(s string) (setup, rest string) {
	end := 0
	for {
		part := s[end:]
		if end > 0 {
			var found bool
			if part, found = strings.CutPrefix(part, " && "); !found {
				break
			}
		}
		ok := false
		switch {
		case strings.HasPrefix(part, "export "):
			if _, value, found := strings.Cut(part[len("export "):], "="); found {
				_, part, ok = readWord(value, "")
			}
		case strings.HasPrefix(part, "cd "):
			_, part, ok = readWord(part[len("cd "):], "")
		}
		if !ok {
			break
		}
		end = len(s) - len(part)
	}
	return s[:end], s[end:]
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
