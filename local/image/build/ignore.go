package build

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// ignorePattern is one line of a .dockerignore file.
type ignorePattern struct {
	re      *regexp.Regexp
	exclude bool // a "!" line: the files it matches are kept
}

// ignorer decides which files of a build context .dockerignore excludes,
// as Docker does: patterns match slash-separated paths relative to the
// context (a leading "/" is dropped), with * and ? not matching "/", ** any
// number of folders, [...] classes; a pattern that matches a folder
// excludes what it holds; "!" lines re-include; the last matching line
// wins; "#" lines are comments.
type ignorer struct {
	patterns   []ignorePattern
	exceptions bool
}

// readIgnore reads dir/.dockerignore; a missing file excludes nothing.
func readIgnore(dir string) (*ignorer, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return &ignorer{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read .dockerignore: %w", err)
	}
	defer f.Close()
	return parseIgnore(f)
}

// parseIgnore reads .dockerignore lines.
func parseIgnore(r io.Reader) (*ignorer, error) {
	ig := &ignorer{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{}
		if strings.HasPrefix(line, "!") {
			p.exclude, ig.exceptions = true, true
			line = strings.TrimSpace(line[1:])
		}
		line = strings.TrimPrefix(path.Clean(filepath.ToSlash(line)), "/")
		if line == "" || line == "." {
			continue
		}
		re, err := patternRegexp(line)
		if err != nil {
			return nil, fmt.Errorf(".dockerignore line %d: %w", n, err)
		}
		p.re = re
		ig.patterns = append(ig.patterns, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read .dockerignore: %w", err)
	}
	return ig, nil
}

// patternRegexp compiles a .dockerignore pattern.
func patternRegexp(p string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '*' && strings.HasPrefix(p[i:], "**"):
			i++
			if strings.HasPrefix(p[i+1:], "/") {
				i++
				b.WriteString("(.*/)?") // **/ is zero or more folders
			} else {
				b.WriteString(".*")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("pattern %q: missing ']'", p)
			}
			class := p[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j
		case c == '\\' && i+1 < len(p):
			i++
			b.WriteString(regexp.QuoteMeta(string(p[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", p, err)
	}
	return re, nil
}

// ignored reports whether the context path rel (slash-separated,
// relative) is excluded: the last pattern matching it or one of its
// folders decides.
func (ig *ignorer) ignored(rel string) bool {
	out := false
	for _, p := range ig.patterns {
		for q := rel; q != "." && q != ""; q = path.Dir(q) {
			if p.re.MatchString(q) {
				out = !p.exclude
				break
			}
		}
	}
	return out
}

// prunes reports whether a folder that is excluded can be skipped whole:
// no "!" line could re-include something inside it.
func (ig *ignorer) prunes() bool { return !ig.exceptions }
