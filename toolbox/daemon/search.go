package daemon

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
)

// handleSearch is GET /files/search: the files and folders under path
// whose name (for a pattern without a slash) or path relative to path
// (for a pattern with one) matches a glob pattern.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) error {
	root, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	g, err := compileGlob(r.URL.Query().Get("pattern"))
	if err != nil {
		return err
	}
	if fi, err := os.Stat(root); err != nil {
		return fsError(root, err)
	} else if !fi.IsDir() {
		return badRequest("%q is not a directory; search looks for names inside a directory", root)
	}
	out := newJSONList(w, `{"files":[`, "]}")
	err = walkTree(r.Context(), root, func(p string, d fs.DirEntry) error {
		rel, err := filepath.Rel(root, p)
		if err != nil || !g.match(filepath.ToSlash(rel)) {
			return nil
		}
		return out.add(p)
	})
	if err != nil && !out.started() {
		return err
	}
	out.end()
	return nil
}
