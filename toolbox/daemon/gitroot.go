package daemon

import (
	"errors"
	"io/fs"
	"net/http"
)

// gitPath resolves the git request path p inside the server's root and
// returns the folder's name for go-git, which resolves path strings
// itself: the kernel's name of the folder found (fsRoot.hostPath), so a
// link planted in p leads go-git nowhere outside the root. With create,
// missing folders are made first (inside the root), as git init makes
// them. A path that does not exist gives 404 GIT_REPO_NOT_FOUND.
//
// What go-git then reads and writes below that folder (.git, the working
// tree) goes through path strings, not descriptors.
func (s *Server) gitPath(p string, create bool) (string, error) {
	dir, err := s.resolve(p)
	if err != nil {
		return "", err
	}
	if create {
		if err := s.root.mkdirAll(dir, 0o755); err != nil {
			return "", fsError(dir, err)
		}
	}
	host, err := s.root.hostPath(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errorf(http.StatusNotFound, codeGitRepoNotFound, "%q is not a git repository; clone or init one first", dir)
	}
	if err != nil {
		return "", fsError(dir, err)
	}
	return host, nil
}
