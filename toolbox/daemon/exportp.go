package daemon

import (
	"errors"
	"strconv"
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
		case p.b[p.i] == '"':
			p.i++
			for {
				if p.i >= len(p.b) {
					return "", errExportSyntax
				}
				c := p.b[p.i]
				p.i++
				if c == '"' {
					break
				}
				if c == '\\' && p.i < len(p.b) {
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
		case p.b[p.i] == '\'':
			p.i++
			for {
				if p.i >= len(p.b) {
					return "", errExportSyntax
				}
				c := p.b[p.i]
				p.i++
				if c == '\'' {
					break
				}
				out = append(out, c)
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
