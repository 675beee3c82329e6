package daemon

import (
	"net/http"
	"path/filepath"
)

// handleSearch is GET /files/search: the files and folders under path
// whose name (for a pattern without a slash) or path relative to path
// (for a pattern with one) matches a glob pattern, each in the caller's
// form (echoPath).
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query().Get("path")
	root, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	g, err := compileGlob(r.URL.Query().Get("pattern"))
	if err != nil {
		return err
	}
	if fi, err := s.root.stat(root); err != nil {
		return fsError(root, err)
	} else if !fi.IsDir() {
		return badRequest("%q is not a directory; search looks for names inside a directory", root)
	}
	out := newJSONList(w, `{"files":[`, "]}")
	err = s.root.walk(r.Context(), root, walkOptions{skipPseudo: true}, func(e walkEntry) error {
		rel, err := filepath.Rel(root, e.path)
		if err != nil || !g.match(filepath.ToSlash(rel)) {
			return nil
		}
		return out.add(echoPath(q, root, e.path))
	})
	if err != nil && !out.started() {
		return err
	}
	out.end()
	return nil
}
