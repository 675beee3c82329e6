package build

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
)

// ErrUnsupported is matched (errors.Is) by the error about an instruction,
// flag or form the builder does not support.
var ErrUnsupported = errors.New("not supported by agentbox image build")

// LineError is an error about one line of a Dockerfile.
type LineError struct {
	Line        int    // the instruction's first line, from 1
	Instruction string // upper case, "" for a line that is no instruction
	Err         error
}

func (e *LineError) Error() string {
	if e.Instruction == "" {
		return fmt.Sprintf("Dockerfile line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("Dockerfile line %d: %s: %v", e.Line, e.Instruction, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Dockerfile is a parsed Dockerfile: its instructions as written, before
// any variable is substituted.
type Dockerfile struct {
	// Escape is the escape character: '\\', or '`' set by the escape
	// parser directive.
	Escape rune
	// Syntax is the value of the syntax parser directive, which is
	// recorded and otherwise ignored.
	Syntax       string
	Instructions []Instruction
}

// Instruction is one instruction of a Dockerfile, continuation lines
// joined.
type Instruction struct {
	Line int    // its first line, from 1
	Cmd  string // upper case: "RUN", "COPY", …
	// Flags are its leading --name=value options, as written.
	Flags []string
	// Args are its arguments: for the exec (JSON) form, the array's
	// strings; for RUN, CMD and ENTRYPOINT in shell form, the command
	// text as one string, as for WORKDIR and USER; otherwise the words (quotes kept for ENV, ARG
	// and LABEL, which pair names and values).
	Args []string
	// JSON is set for the exec form: a JSON array of strings.
	JSON bool
	// Text is the instruction as written, continuation lines joined.
	Text string
}

// supported lists the instructions Parse accepts, with whether they take
// an exec (JSON) form and which flags.
var supported = map[string]struct {
	json  bool
	flags []string
}{
	"FROM":       {flags: []string{"platform"}},
	"RUN":        {json: true},
	"CMD":        {json: true},
	"ENTRYPOINT": {json: true},
	"ENV":        {},
	"ARG":        {},
	"WORKDIR":    {},
	"USER":       {},
	"COPY":       {json: true, flags: []string{"chown", "chmod", "from"}},
	"ADD":        {json: true, flags: []string{"chown", "chmod"}},
	"LABEL":      {},
	"EXPOSE":     {},
}

// refusedFlags names the flags Docker knows and agentbox refuses, with
// what to do instead.
var refusedFlags = map[string]string{
	"mount":        "RUN --mount",
	"network":      "RUN --network: the build's network policy (--network) applies to every RUN",
	"security":     "RUN --security",
	"link":         "--link",
	"parents":      "--parents",
	"exclude":      "--exclude: use .dockerignore",
	"checksum":     "ADD --checksum: ADD does not fetch URLs",
	"keep-git-dir": "ADD --keep-git-dir: ADD does not fetch git repositories",
}

var directiveRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^#[ \t]*([a-zA-Z][a-zA-Z0-9]*)[ \t]*=[ \t]*(.*?)[ \t]*$`)
})

// Parse reads a Dockerfile: parser directives (escape, syntax), comments,
// line continuations and the instructions agentbox builds (FROM, RUN, CMD,
// ENTRYPOINT, ENV, ARG, WORKDIR, USER, COPY, ADD; LABEL and EXPOSE are
// accepted). Any other instruction is a *LineError matching
// ErrUnsupported that names the line. A Dockerfile without FROM is an
// error.
func Parse(r io.Reader) (*Dockerfile, error) {
	df := &Dockerfile{Escape: '\\'}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	lineNo := 0
	directives := true
	seen := map[string]bool{}
	var cur strings.Builder
	start := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), "\r")
		if lineNo == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if directives {
			if m := directiveRE().FindStringSubmatch(line); m != nil {
				name := strings.ToLower(m[1])
				if name == "escape" || name == "syntax" || name == "check" {
					if seen[name] {
						return nil, &LineError{Line: lineNo, Err: fmt.Errorf("parser directive %q given twice", name)}
					}
					seen[name] = true
					if err := df.directive(name, m[2]); err != nil {
						return nil, &LineError{Line: lineNo, Err: err}
					}
					continue
				}
			}
			directives = false
		}
		trimmed := strings.TrimLeft(line, " \t")
		if cur.Len() == 0 {
			if trimmed == "" || trimmed[0] == '#' {
				continue
			}
			start = lineNo
		} else if trimmed == "" || trimmed[0] == '#' {
			continue // comments and empty lines inside a continuation are dropped, as by Docker
		}
		body, more := df.continues(line)
		if cur.Len() == 0 {
			body = strings.TrimLeft(body, " \t")
		}
		cur.WriteString(body)
		if more {
			continue
		}
		in, err := parseInstruction(start, cur.String(), df.Escape)
		if err != nil {
			return nil, err
		}
		df.Instructions = append(df.Instructions, in)
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read Dockerfile: %w", err)
	}
	if cur.Len() > 0 {
		in, err := parseInstruction(start, cur.String(), df.Escape)
		if err != nil {
			return nil, err
		}
		df.Instructions = append(df.Instructions, in)
	}
	if err := df.check(); err != nil {
		return nil, err
	}
	return df, nil
}

// directive applies the parser directive name=value.
func (df *Dockerfile) directive(name, value string) error {
	switch name {
	case "escape":
		if value != "\\" && value != "`" {
			return fmt.Errorf("escape directive: invalid escape character %q: use \\ or `", value)
		}
		df.Escape = rune(value[0])
	case "syntax":
		df.Syntax = value
	}
	return nil
}

// continues strips a trailing escape character (and the blanks after
// it) from line and reports whether there was one: the instruction goes
// on on the next line.
func (df *Dockerfile) continues(line string) (string, bool) {
	t := strings.TrimRight(line, " \t")
	if strings.HasSuffix(t, string(df.Escape)) {
		return t[:len(t)-1], true
	}
	return line, false
}

// check validates the instructions as a whole: a FROM first (after
// global ARGs), stage names used once.
func (df *Dockerfile) check() error {
	from := 0
	names := map[string]bool{}
	for _, in := range df.Instructions {
		switch {
		case in.Cmd == "FROM":
			from++
			if len(in.Args) == 3 {
				name := strings.ToLower(in.Args[2])
				if names[name] {
					return &LineError{Line: in.Line, Instruction: in.Cmd, Err: fmt.Errorf("a second stage named %q: give each stage its own name", in.Args[2])}
				}
				names[name] = true
			}
		case from == 0 && in.Cmd != "ARG":
			return &LineError{Line: in.Line, Instruction: in.Cmd, Err: errors.New("comes before any FROM: a Dockerfile starts with FROM (only ARG may come before it)")}
		}
	}
	if from == 0 {
		return errors.New("Dockerfile has no FROM instruction: start it with FROM IMAGE (or FROM scratch)")
	}
	return nil
}

// parseInstruction splits one logical line into an instruction.
func parseInstruction(line int, text string, escape rune) (Instruction, error) {
	cmd, rest, _ := strings.Cut(text, " ")
	if i := strings.IndexAny(cmd, "\t"); i >= 0 {
		cmd, rest = text[:i], text[i+1:]
	}
	in := Instruction{Line: line, Cmd: strings.ToUpper(cmd), Text: text}
	spec, ok := supported[in.Cmd]
	if !ok {
		return in, &LineError{Line: line, Instruction: in.Cmd, Err: fmt.Errorf("unknown or unsupported instruction %w (supported: ADD, ARG, CMD, COPY, ENTRYPOINT, ENV, EXPOSE, FROM, LABEL, RUN, USER, WORKDIR)", ErrUnsupported)}
	}
	rest = strings.TrimSpace(rest)
	flags, rest, err := leadingFlags(rest, spec.flags)
	if err != nil {
		return in, &LineError{Line: line, Instruction: in.Cmd, Err: err}
	}
	in.Flags = flags
	if spec.json && strings.HasPrefix(rest, "[") {
		var arr []string
		if json.Unmarshal([]byte(rest), &arr) == nil {
			in.Args, in.JSON = arr, true
			return in, in.checkArgs()
		}
		if in.Cmd == "COPY" || in.Cmd == "ADD" {
			return in, &LineError{Line: line, Instruction: in.Cmd, Err: errors.New("invalid JSON array: write [\"SRC\", …, \"DEST\"] with double quotes")}
		}
	}
	switch in.Cmd {
	case "RUN", "CMD", "ENTRYPOINT", "WORKDIR", "USER":
		if rest != "" {
			in.Args = []string{rest}
		}
	default:
		in.Args = splitWords(rest, escape)
	}
	return in, in.checkArgs()
}

// checkArgs checks the number of arguments of in.
func (in Instruction) checkArgs() error {
	n := len(in.Args)
	bad := ""
	switch in.Cmd {
	case "FROM":
		if n != 1 && !(n == 3 && strings.EqualFold(in.Args[1], "AS")) {
			bad = "needs IMAGE or IMAGE AS NAME"
		}
	case "RUN":
		if n == 0 {
			bad = "needs a command"
		} else if !in.JSON && strings.HasPrefix(strings.TrimSpace(in.Args[0]), "<<") {
			return &LineError{Line: in.Line, Instruction: in.Cmd, Err: fmt.Errorf("here-documents are %w", ErrUnsupported)}
		}
	case "WORKDIR", "USER":
		if n == 0 {
			bad = "needs an argument"
		}
	case "COPY", "ADD":
		if n < 2 {
			bad = "needs SRC... DEST"
		}
	case "ENV", "ARG", "LABEL", "EXPOSE":
		if n == 0 {
			bad = "needs at least one argument"
		}
	}
	if bad != "" {
		return &LineError{Line: in.Line, Instruction: in.Cmd, Err: errors.New(bad)}
	}
	return nil
}

// leadingFlags takes the --name=value words at the start of rest,
// checking each name against allowed.
func leadingFlags(rest string, allowed []string) (flags []string, after string, err error) {
	for strings.HasPrefix(rest, "--") {
		word, tail, _ := strings.Cut(rest, " ")
		if i := strings.IndexByte(word, '\t'); i >= 0 {
			word, tail = rest[:i], rest[i+1:]
		}
		name, _, hasValue := strings.Cut(word[2:], "=")
		if what, ok := refusedFlags[name]; ok {
			what, instead, _ := strings.Cut(what, ": ")
			if instead != "" {
				instead = ": " + instead
			}
			return nil, "", fmt.Errorf("%s is %w%s", what, ErrUnsupported, instead)
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			return nil, "", fmt.Errorf("unknown flag --%s: %w", name, ErrUnsupported)
		}
		if !hasValue {
			return nil, "", fmt.Errorf("flag --%s needs a value: write --%s=VALUE", name, name)
		}
		flags = append(flags, word)
		rest = strings.TrimLeft(tail, " \t")
	}
	return flags, rest, nil
}

// splitWords splits s at blanks outside quotes, keeping quotes and
// escapes in the words (they are removed when variables are substituted).
func splitWords(s string, escape rune) []string {
	var words []string
	var w strings.Builder
	var quote rune
	inWord, escaped := false, false
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
		case r == escape && quote != '\'':
			escaped = true
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			continue
		}
		w.WriteRune(r)
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
