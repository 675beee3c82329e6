package daemon

import (
	"path/filepath"
	"strings"
)

// echoPath returns p, a path met at or below root (where the caller's
// path q resolved), in the caller's form, as Daytona's daemon gives the
// paths that find and search return: for an absolute q, p itself; for a
// relative one (taken from the work dir), q itself for root, and q joined
// with the part of p below root for the rest ("src" finds "src/a.go", "."
// finds "a.go").
func echoPath(q, root, p string) string {
	if filepath.IsAbs(q) {
		return p
	}
	if p == root {
		return q
	}
	return filepath.Join(q, strings.TrimPrefix(p, root))
}
