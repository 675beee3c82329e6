package server

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// jsonFields picks a few top-level fields out of a JSON object as it
// streams by (an io.Writer fed with the bytes of a request or an answer
// that the proxy passes on unchanged), keeping at most a given number of
// bytes of each and nothing else: a command's 10 MiB of output costs it
// a scan, no memory. It understands just enough JSON to skip strings,
// nested objects and arrays; on bytes that are not a JSON object it stops
// looking and reports what it has.
type jsonFields struct {
	// want maps the keys to keep to the most bytes of their values kept.
	want map[string]int
	got  map[string][]byte // raw values: a string's bytes without quotes, escapes kept
	str  map[string]bool   // the value was a string
	cut  map[string]bool   // the value was longer than kept

	depth     int
	phase     int
	inStr     bool
	esc       bool
	key       []byte
	keyTooBig bool
	cur       string // the wanted key whose value is being read; "" none
	done      bool
}

// Phases of jsonFields at depth 1.
const (
	phaseKeyOrEnd = iota // before a key (or the object's end)
	phaseKey             // in a key's string
	phaseColon           // after a key
	phaseValue           // after the colon
	phaseString          // in a string value
	phaseScalar          // in a number, true, false or null
	phaseNested          // in an object or array value (depth > 1)
	phaseAfter           // after a value
)

// maxScanKey is the longest key jsonFields compares with those it wants.
const maxScanKey = 64

// newJSONFields returns a jsonFields keeping the values of want's keys.
func newJSONFields(want map[string]int) *jsonFields {
	return &jsonFields{want: want, got: map[string][]byte{}, str: map[string]bool{}, cut: map[string]bool{}}
}

// Write scans p; it never fails.
func (j *jsonFields) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !j.done {
		if j.inStr && !j.esc && j.cur == "" && j.phase != phaseKey {
			// A string nobody keeps: jump to its next quote or escape.
			i := bytes.IndexByte(p, '"')
			before := p
			if i >= 0 {
				before = p[:i]
			}
			if e := bytes.IndexByte(before, '\\'); e >= 0 {
				i = e
			}
			if i < 0 {
				return n, nil
			}
			p = p[i:]
		}
		j.step(p[0])
		p = p[1:]
	}
	return n, nil
}

// step scans one byte.
func (j *jsonFields) step(c byte) {
	if j.inStr {
		switch {
		case j.esc:
			j.esc = false
		case c == '\\':
			j.esc = true
		case c == '"':
			j.inStr = false
			j.endString()
			return
		}
		j.keep(c)
		return
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		if j.depth == 1 && j.phase == phaseScalar {
			j.phase, j.cur = phaseAfter, ""
			j.checkDone()
		}
		return
	}
	if j.depth == 0 {
		if c == '{' {
			j.depth, j.phase = 1, phaseKeyOrEnd
		} else {
			j.done = true
		}
		return
	}
	if j.depth > 1 {
		switch c {
		case '"':
			j.inStr = true
		case '{', '[':
			j.depth++
		case '}', ']':
			j.depth--
			if j.depth == 1 {
				j.phase = phaseAfter
			}
		}
		return
	}
	switch j.phase {
	case phaseKeyOrEnd:
		switch c {
		case '"':
			j.inStr, j.phase, j.key, j.keyTooBig = true, phaseKey, j.key[:0], false
		default:
			j.done = true // '}' or not JSON
		}
	case phaseColon:
		if c != ':' {
			j.done = true
			return
		}
		j.phase = phaseValue
	case phaseValue:
		j.cur = ""
		if _, ok := j.want[string(j.key)]; ok && !j.keyTooBig {
			j.cur = string(j.key)
			j.got[j.cur], j.str[j.cur], j.cut[j.cur] = j.got[j.cur][:0], c == '"', false
		}
		switch c {
		case '"':
			j.inStr, j.phase = true, phaseString
		case '{', '[':
			j.depth, j.phase, j.cur = 2, phaseNested, ""
		default:
			j.phase = phaseScalar
			j.keep(c)
		}
	case phaseScalar:
		switch c {
		case ',':
			j.phase, j.cur = phaseKeyOrEnd, ""
			j.checkDone()
		case '}':
			j.done = true
		default:
			j.keep(c)
		}
	case phaseAfter:
		switch c {
		case ',':
			j.phase = phaseKeyOrEnd
		default:
			j.done = true // '}' or not JSON
		}
	default:
		j.done = true
	}
}

// keep keeps byte c of the key or of the wanted value being read.
func (j *jsonFields) keep(c byte) {
	switch {
	case j.phase == phaseKey:
		if len(j.key) < maxScanKey {
			j.key = append(j.key, c)
		} else {
			j.keyTooBig = true
		}
	case j.cur != "":
		if len(j.got[j.cur]) < j.want[j.cur] {
			j.got[j.cur] = append(j.got[j.cur], c)
		} else {
			j.cut[j.cur] = true
		}
	}
}

// endString ends the string being read: a key, or a value.
func (j *jsonFields) endString() {
	if j.phase == phaseKey {
		j.phase = phaseColon
		return
	}
	if j.phase == phaseString {
		j.phase, j.cur = phaseAfter, ""
		j.checkDone()
	}
}

// checkDone ends the scan once every wanted key has a value.
func (j *jsonFields) checkDone() {
	if len(j.got) == len(j.want) {
		j.done = true
	}
}

// text returns the string value of key, decoded, and whether it was cut
// short; ok is false when the object had no string there.
func (j *jsonFields) text(key string) (s string, cut, ok bool) {
	raw, found := j.got[key]
	if !found || !j.str[key] {
		return "", false, false
	}
	cut = j.cut[key]
	// A value cut short may end in the middle of an escape: drop up to
	// its 6 bytes until it decodes.
	for drop := 0; drop <= 6 && drop <= len(raw); drop++ {
		var v string
		if err := json.Unmarshal(append(append([]byte{'"'}, raw[:len(raw)-drop]...), '"'), &v); err == nil {
			return v, cut || drop > 0, true
		}
		if !cut {
			break
		}
	}
	return "", cut, false
}

// integer returns the integer value of key; ok is false when the object
// had none there (null, absent, or not an integer).
func (j *jsonFields) integer(key string) (int, bool) {
	raw, found := j.got[key]
	if !found || j.str[key] || j.cut[key] {
		return 0, false
	}
	n, err := strconv.Atoi(string(raw))
	return n, err == nil
}

// boolean returns the boolean value of key (false when absent).
func (j *jsonFields) boolean(key string) bool {
	raw, found := j.got[key]
	return found && !j.str[key] && string(raw) == "true"
}
