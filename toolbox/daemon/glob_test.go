package daemon

import (
	"path"
	"strings"
	"testing"
)

// FuzzGlob compiles arbitrary patterns: they compile or are refused as a
// bad request, never panic, and a slash-free pattern without braces
// matches names exactly as path.Match does.
func FuzzGlob(f *testing.F) {
	for _, p := range []string{"*.go", "src/**/*.ts", "{a,b}", "{a,{b,c}}/*", "[", `\{`, "{", "a/**", "**"} {
		f.Add(p, "src/a/b.ts")
	}
	f.Fuzz(func(t *testing.T, pattern, rel string) {
		g, err := compileGlob(pattern)
		if err != nil {
			if asHTTPError(err).status != 400 {
				t.Fatalf("compileGlob(%q): %v", pattern, err)
			}
			return
		}
		got := g.match(rel)
		if !strings.ContainsAny(pattern, "/{") && rel != "" {
			if want, _ := path.Match(pattern, path.Base(rel)); got != want {
				t.Fatalf("%q matching %q: %v, path.Match says %v", pattern, rel, got, want)
			}
		}
	})
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, rel string
		want         bool
	}{
		{"*.go", "a/b/c.go", true},
		{"*.go", "a/b/c.txt", false},
		{"**", "a/b", true},
		{"a/**", "a", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/*", "a/b/c", false},
		{"{a,b}/c", "b/c", true},
		{"{a,{b,c}}/d", "c/d", true},
		{`\{a\}/x`, "{a}/x", true},
	} {
		g, err := compileGlob(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := g.match(c.rel); got != c.want {
			t.Errorf("%q matching %q: %v, want %v", c.pattern, c.rel, got, c.want)
		}
	}
}

// Brace expressions cannot expand without bound.
func TestGlobAlternativesBounded(t *testing.T) {
	if _, err := compileGlob(strings.Repeat("{a,b,c}", 6)); err == nil {
		t.Fatal("3^6 alternatives accepted")
	}
}

// Many ** cost polynomial, not exponential, time.
func TestGlobManyDoubleStars(t *testing.T) {
	g, err := compileGlob(strings.Repeat("**/a/", 40) + "b")
	if err != nil {
		t.Fatal(err)
	}
	if g.match(strings.Repeat("a/", 200) + "c") {
		t.Error("matched a path ending in c")
	}
}
