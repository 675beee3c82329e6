package daemon

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// errExportSyntax reports output of `export -p` that parseExportP does not
// understand.
var errExportSyntax = errors.New("unrecognised export -p output")

// parseExportP parses bash's `export -p` output (`declare -x NAME="v"`,
// `declare -x NAME=$'v'`, or `export NAME="v"` in POSIX mode) into "K=V"
// entries. Exported variables without a value are left out.
func parseExportP(b []byte) ([]string, error) {
	p := exportParser{b: b}
	var out []string
	for {
		p.skipSpace()
		if p.i >= len(p.b) {
			return out, nil
		}
		switch {
		case p.consume("declare "):
			for p.i < len(p.b) && p.b[p.i] == '-' {
				for p.i < len(p.b) && p.b[p.i] != ' ' {
					p.i++
				}
				p.skipBlanks()
			}
		case p.consume("export "):
		default:
			return nil, errExportSyntax
		}
		name := p.name()
		if name == "" {
			return nil, errExportSyntax
		}
		if p.i >= len(p.b) || p.b[p.i] == '\n' {
			continue // exported but unset
		}
		if p.b[p.i] != '=' {
			return nil, errExportSyntax
		}
		p.i++
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.i < len(p.b) && p.b[p.i] != '\n' {
			return nil, errExportSyntax
		}
		out = append(out, name+"="+val)
	}
}

type exportParser struct {
	b []byte
	i int
}

func (p *exportParser) skipSpace() {
	for p.i < len(p.b) && (p.b[p.i] == '\n' || p.b[p.i] == ' ') {
		p.i++
	}
}

func (p *exportParser) skipBlanks() {
	for p.i < len(p.b) && p.b[p.i] == ' ' {
		p.i++
	}
}

func (p *exportParser) consume(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *exportParser) name() string {
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || p.i > start && c >= '0' && c <= '9' {
			p.i++
			continue
		}
		break
	}
	return string(p.b[start:p.i])
}

// quoted appends the rest of a word quoted with q ('"' or '\”, the
// opening quote consumed) to out, up to the closing quote. Inside double
// quotes a backslash escapes " \ $ ` and newline, and a backslash-newline
// vanishes.
func (p *exportParser) quoted(out []byte, q byte) ([]byte, error) {
	for {
		if p.i >= len(p.b) {
			return nil, errExportSyntax
		}
		c := p.b[p.i]
		p.i++
		if c == q {
			return out, nil
		}
		if q == '"' && c == '\\' && p.i < len(p.b) {
			switch n := p.b[p.i]; n {
			case '"', '\\', '$', '`', '\n':
				p.i++
				if n != '\n' {
					out = append(out, n)
				}
				continue
			}
		}
		out = append(out, c)
	}
}

// value parses one quoted word: "…", '…', $'…', or a bare word; adjacent
// quoted parts are concatenated as the shell would.
func (p *exportParser) value() (string, error) {
	var out []byte
	for p.i < len(p.b) && p.b[p.i] != '\n' && p.b[p.i] != ' ' {
		switch {
		case p.consume("$'"):
			v, err := p.ansiC()
			if err != nil {
				return "", err
			}
			out = append(out, v...)
		case p.b[p.i] == '"' || p.b[p.i] == '\'':
			q := p.b[p.i]
			p.i++
			var err error
			if out, err = p.quoted(out, q); err != nil {
				return "", err
			}
		case p.b[p.i] == '\\' && p.i+1 < len(p.b):
			out = append(out, p.b[p.i+1])
			p.i += 2
		default:
			out = append(out, p.b[p.i])
			p.i++
		}
	}
	return string(out), nil
}

// ansiC parses the body of $'…' after the opening quote.
func (p *exportParser) ansiC() ([]byte, error) {
	var out []byte
	for {
		if p.i >= len(p.b) {
			return nil, errExportSyntax
		}
		c := p.b[p.i]
		p.i++
		if c == '\'' {
			return out, nil
		}
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if p.i >= len(p.b) {
			return nil, errExportSyntax
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case 'a':
			out = append(out, 7)
		case 'b':
			out = append(out, 8)
		case 'e', 'E':
			out = append(out, 27)
		case 'f':
			out = append(out, 12)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'v':
			out = append(out, 11)
		case '\\', '\'', '"', '?':
			out = append(out, e)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			start := p.i - 1
			for p.i < len(p.b) && p.i-start < 3 && p.b[p.i] >= '0' && p.b[p.i] <= '7' {
				p.i++
			}
			n, _ := strconv.ParseUint(string(p.b[start:p.i]), 8, 16)
			out = append(out, byte(n))
		case 'x':
			start := p.i
			for p.i < len(p.b) && p.i-start < 2 && isHex(p.b[p.i]) {
				p.i++
			}
			if p.i == start {
				out = append(out, '\\', 'x')
				continue
			}
			n, _ := strconv.ParseUint(string(p.b[start:p.i]), 16, 8)
			out = append(out, byte(n))
		case 'u', 'U':
			max := 4
			if e == 'U' {
				max = 8
			}
			start := p.i
			for p.i < len(p.b) && p.i-start < max && isHex(p.b[p.i]) {
				p.i++
			}
			if p.i == start {
				out = append(out, '\\', e)
				continue
			}
			n, _ := strconv.ParseUint(string(p.b[start:p.i]), 16, 32)
			out = utf8.AppendRune(out, rune(n))
		case 'c':
			if p.i < len(p.b) {
				out = append(out, p.b[p.i]&0x1f)
				p.i++
			}
		default:
			out = append(out, '\\', e)
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// shellOwnVars are the variables bash sets or computes itself; restoring
// them into a new shell would be wrong or impossible.
var shellOwnVars = map[string]bool{
	"BASH": true, "BASHOPTS": true, "BASHPID": true, "BASH_ALIASES": true, "BASH_ARGC": true,
	"BASH_ARGV": true, "BASH_ARGV0": true, "BASH_CMDS": true, "BASH_COMMAND": true,
	"BASH_EXECUTION_STRING": true, "BASH_LINENO": true, "BASH_LOADABLES_PATH": true,
	"BASH_REMATCH": true, "BASH_SOURCE": true, "BASH_SUBSHELL": true, "BASH_VERSINFO": true,
	"BASH_VERSION": true, "COMP_WORDBREAKS": true, "DIRSTACK": true, "EPOCHREALTIME": true,
	"EPOCHSECONDS": true, "EUID": true, "FUNCNAME": true, "GROUPS": true, "HISTCMD": true,
	"HOSTNAME": true, "HOSTTYPE": true, "LINENO": true, "MACHTYPE": true, "OPTERR": true,
	"OPTIND": true, "OSTYPE": true, "PIPESTATUS": true, "PPID": true, "RANDOM": true,
	"SECONDS": true, "SHELLOPTS": true, "SHLVL": true, "SRANDOM": true, "UID": true, "_": true,
	"PWD": true, "OLDPWD": true,
}

// restoreScript builds the script that recreates, in a new shell, the
// shell variables (from `declare -p`) and functions (from `declare -f`) a
// command left behind. Exported variables travel in the environment
// instead; bash's own variables and ours (__agentbox_*) are left out.
func restoreScript(declareP, declareF []byte) string {
	var b []byte
	for _, stmt := range splitStatements(declareP) {
		p := exportParser{b: stmt}
		if !p.consume("declare ") {
			continue
		}
		flags := ""
		for p.i < len(p.b) && p.b[p.i] == '-' {
			start := p.i
			for p.i < len(p.b) && p.b[p.i] != ' ' {
				p.i++
			}
			flags += string(p.b[start:p.i])
			p.skipBlanks()
		}
		name := p.name()
		if name == "" || p.i >= len(p.b) || p.b[p.i] != '=' {
			continue // unset, or not understood
		}
		if shellOwnVars[name] || strings.HasPrefix(name, "__agentbox_") || strings.Contains(flags, "x") {
			continue
		}
		b = append(append(b, stmt...), '\n')
	}
	b = append(b, declareF...)
	return string(b)
}

// splitStatements splits shell output into statements at newlines outside
// quotes ('…', "…", $'…').
func splitStatements(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			i++
		case c == '\'':
			for i++; i < len(b) && b[i] != '\''; i++ {
			}
		case c == '$' && i+1 < len(b) && b[i+1] == '\'':
			for i += 2; i < len(b) && b[i] != '\''; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '\n':
			if i > start {
				out = append(out, b[start:i])
			}
			start = i + 1
		}
	}
	if start < len(b) {
		out = append(out, b[start:])
	}
	return out
}
