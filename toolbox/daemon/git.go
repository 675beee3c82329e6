package daemon

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// gitRoutes serves /git: repositories handled in the server's process by
// go-git, so that no git binary is needed in the sandbox. Remote
// operations are in gitremote.go, configuration in gitconfig.go, status
// and history in gitstatus.go, commits in gitcommit.go, branches in
// gitbranch.go, reset and restore in gitreset.go and gitrestore.go.
func (s *Server) gitRoutes() []route {
	return []route{
		{"POST /git/clone", s.handleGitClone},
		{"GET /git/status", s.handleGitStatus},
		{"POST /git/add", s.handleGitAdd},
		{"POST /git/commit", s.handleGitCommit},
		{"POST /git/push", s.handleGitPush},
		{"POST /git/pull", s.handleGitPull},
		{"GET /git/branches", s.handleGitBranches},
		{"POST /git/branches", s.handleGitCreateBranch},
		{"DELETE /git/branches", s.handleGitDeleteBranch},
		{"POST /git/checkout", s.handleGitCheckout},
		{"GET /git/history", s.handleGitHistory},
		{"POST /git/init", s.handleGitInit},
		{"GET /git/remotes", s.handleGitRemotes},
		{"POST /git/remotes", s.handleGitAddRemote},
		{"POST /git/reset", s.handleGitReset},
		{"POST /git/restore", s.handleGitRestore},
		{"GET /git/config", s.handleGitGetConfig},
		{"POST /git/config", s.handleGitSetConfig},
		{"POST /git/config/user", s.handleGitConfigUser},
		{"POST /git/credentials", s.handleGitCredentials},
	}
}

// A gitRepo is an opened repository and the folder it was asked for by.
type gitRepo struct {
	*git.Repository
	dir string // the resolved request path
}

// openRepo opens the repository at the request path p (relative paths
// resolve against the work dir). A path that is no repository gives 404
// GIT_REPO_NOT_FOUND.
func (s *Server) openRepo(p string) (*gitRepo, error) {
	dir, err := s.gitPath(p, false)
	if err != nil {
		return nil, err
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, errorf(http.StatusNotFound, codeGitRepoNotFound, "%q is not a git repository; clone or init one first", dir)
		}
		return nil, fsError(dir, err)
	}
	return &gitRepo{Repository: r, dir: dir}, nil
}

// openRepoQuery opens the repository named by the path query parameter.
func (s *Server) openRepoQuery(r *http.Request) (*gitRepo, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return nil, badRequest("query parameter %q is required", "path")
	}
	return s.openRepo(p)
}

// worktree returns the repository's working tree; a bare repository gives
// 400.
func (g *gitRepo) worktree() (*git.Worktree, error) {
	w, err := g.Worktree()
	if errors.Is(err, git.ErrIsBareRepository) {
		return nil, badRequest("%q is a bare repository, which has no working tree", g.dir)
	}
	return w, err
}

// openWorktree opens the repository at p and its working tree.
func (s *Server) openWorktree(p string) (*gitRepo, *git.Worktree, error) {
	repo, err := s.openRepo(p)
	if err != nil {
		return nil, nil, err
	}
	wt, err := repo.worktree()
	if err != nil {
		return nil, nil, err
	}
	return repo, wt, nil
}

// openFiles opens the repository at p and its working tree, and makes
// the request's files relative to it (see relFiles); none gives 400
// asking for the files to what.
func (s *Server) openFiles(p string, files []string, what string) (*gitRepo, *git.Worktree, []string, error) {
	if len(files) == 0 {
		return nil, nil, nil, badRequest("files is empty; name the files to %s", what)
	}
	repo, wt, err := s.openWorktree(p)
	if err != nil {
		return nil, nil, nil, err
	}
	rel, err := relFiles(wt, files)
	if err != nil {
		return nil, nil, nil, err
	}
	return repo, wt, rel, nil
}

// relFiles turns request file paths into paths relative to the working
// tree: relative ones are taken from it, absolute ones must lie inside it.
func relFiles(w *git.Worktree, files []string) ([]string, error) {
	root := w.Filesystem.Root()
	out := make([]string, 0, len(files))
	for _, f := range files {
		if f == "" || strings.IndexByte(f, 0) >= 0 {
			return nil, badRequest("file path %q is empty or contains a NUL byte", f)
		}
		abs := f
		if !filepath.IsAbs(f) {
			abs = filepath.Join(root, f)
		}
		rel, err := filepath.Rel(root, filepath.Clean(abs))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, badRequest("file %q is outside the repository %s", f, root)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}

func (s *Server) handleGitInit(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitInitRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	sp, err := s.resolve(req.Path)
	if err != nil {
		return err
	}
	branch := req.InitialBranch
	if branch == "" {
		// The repository's own config counts when it exists (git init
		// again); a folder not yet made has none.
		cfgDir := ""
		if host, err := s.root.hostPath(sp); err == nil {
			cfgDir = host
		}
		branch = s.gitConfigValue(cfgDir, "init.defaultBranch")
	}
	if branch == "" {
		branch = "master" // git's default
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if ref.Validate() != nil {
		return badRequest("%q is not a valid branch name", branch)
	}
	dir, err := s.gitPath(req.Path, true)
	if err != nil {
		return err
	}
	_, err = git.PlainInitWithOptions(dir, &git.PlainInitOptions{Bare: req.Bare, InitOptions: git.InitOptions{DefaultBranch: ref}})
	if err != nil && !errors.Is(err, git.ErrRepositoryAlreadyExists) { // git init again is harmless
		return gitError(fsError(dir, err), nil)
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

// revision resolves a revision (HEAD when empty) to a commit; an unknown
// one gives 404.
func (g *gitRepo) revision(rev string) (plumbing.Hash, error) {
	if rev == "" {
		rev = "HEAD"
	}
	h, err := g.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return plumbing.ZeroHash, errorf(http.StatusNotFound, codeNotFound, "revision %q not found in %s", rev, g.dir)
	}
	return *h, nil
}
