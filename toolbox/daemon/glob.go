package daemon

import (
	"errors"
	"path"
	"strings"
)

// maxGlobAlternatives bounds the patterns one brace expression expands to.
const maxGlobAlternatives = 256

// glob is a compiled GET /files/search pattern: path.Match syntax, plus
// {a,b} alternatives and, in a pattern with a slash, ** for any number of
// folders.
type glob struct {
	byName bool       // no slash: match the base name at any depth
	alts   [][]string // each alternative, split at slashes
}

func compileGlob(pattern string) (*glob, error) {
	if pattern == "" {
		return nil, badRequest("query parameter \"pattern\" is required: a glob such as *.go or src/**/*.ts")
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, badRequest("pattern %q contains a NUL byte", pattern)
	}
	alts, err := expandBraces(pattern)
	if err != nil {
		return nil, badRequest("invalid glob pattern %q: %v", pattern, err)
	}
	g := &glob{byName: !strings.Contains(pattern, "/")}
	for _, a := range alts {
		segs := strings.Split(strings.TrimPrefix(a, "./"), "/")
		for _, seg := range segs {
			if seg == "**" {
				continue
			}
			if _, err := path.Match(seg, ""); err != nil {
				return nil, badRequest("invalid glob pattern %q: %v in %q (escape a literal [ or \\ with \\)", pattern, err, seg)
			}
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// match reports whether rel, a slash-separated path below the search
// root, matches.
func (g *glob) match(rel string) bool {
	if g.byName {
		name := path.Base(rel)
		for _, a := range g.alts {
			if ok, _ := path.Match(a[0], name); ok {
				return true
			}
		}
		return false
	}
	parts := strings.Split(rel, "/")
	for _, a := range g.alts {
		if matchSegments(a, parts) {
			return true
		}
	}
	return false
}

// matchSegments matches path segments against pattern segments, where
// "**" stands for zero or more segments. It fills a table of which pattern
// suffixes match which path suffixes, so many "**" cost no more than
// len(pat)×len(parts) steps.
func matchSegments(pat, parts []string) bool {
	n := len(parts)
	// next[j]: pat[i+1:] matches parts[j:]; cur[j]: pat[i:] does.
	next := make([]bool, n+1)
	next[n] = true // the empty pattern matches the empty path
	cur := make([]bool, n+1)
	for i := len(pat) - 1; i >= 0; i-- {
		if pat[i] == "**" {
			cur[n] = next[n]
			for j := n - 1; j >= 0; j-- {
				cur[j] = next[j] || cur[j+1]
			}
		} else {
			cur[n] = false
			for j := n - 1; j >= 0; j-- {
				ok, _ := path.Match(pat[i], parts[j])
				cur[j] = ok && next[j+1]
			}
		}
		cur, next = next, cur
	}
	return next[0]
}

// expandBraces expands {a,b} alternatives (nested ones too) into the
// patterns they stand for. A backslash escapes the next character.
func expandBraces(p string) ([]string, error) {
	open := -1
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			i++
			continue
		}
		if p[i] == '{' {
			open = i
			break
		}
	}
	if open < 0 {
		return []string{p}, nil
	}
	depth, start := 0, open+1
	var choices []string
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			depth++
		case ',':
			if depth == 1 {
				choices = append(choices, p[start:i])
				start = i + 1
			}
		case '}':
			depth--
			if depth == 0 {
				choices = append(choices, p[start:i])
				var out []string
				for _, c := range choices {
					more, err := expandBraces(p[:open] + c + p[i+1:])
					if err != nil {
						return nil, err
					}
					out = append(out, more...)
					if len(out) > maxGlobAlternatives {
						return nil, errors.New("more than 256 alternatives")
					}
				}
				return out, nil
			}
		}
	}
	return nil, errors.New("a { has no matching }")
}
