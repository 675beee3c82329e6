package build

import (
	"strings"
	"testing"
)

func TestDockerignorePatterns(t *testing.T) {
	ig, err := parseIgnore(strings.NewReader(`
# comment
*.log
/build
**/node_modules
docs/*.md
!docs/keep.md
secret?.txt
[ab].bin
`))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"app.log":                 true,
		"sub/app.log":             false, // * does not cross folders
		"build":                   true,
		"build/out/x":             true, // a folder's content goes with it
		"src/build":               false,
		"node_modules/x.js":       true,
		"a/b/node_modules/y/z.js": true,
		"docs/a.md":               true,
		"docs/keep.md":            false,
		"docs/sub/a.md":           false,
		"secret1.txt":             true,
		"secret12.txt":            false,
		"a.bin":                   true,
		"c.bin":                   false,
		"main.go":                 false,
	} {
		if got := ig.ignored(path); got != want {
			t.Errorf("ignored(%q) = %v, want %v", path, got, want)
		}
	}
	if ig.prunes() {
		t.Error("prunes() with a ! line = true, want false")
	}
}
