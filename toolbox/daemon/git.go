package daemon

import (
	"errors"
	"io/fs"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// gitRoutes serves /git: repositories handled in the server's process by
// go-git, so that no git binary is needed in the sandbox. Remote
// operations are in gitremote.go, configuration in gitconfig.go.
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

// statusName maps a go-git status code to the spec's Status value.
// (Functions, not package-level maps: nothing runs at package init, which
// every sandbox init would pay for.)
func statusName(c git.StatusCode) string {
	switch c {
	case git.Untracked:
		return toolbox.GitStatusUntracked
	case git.Modified:
		return toolbox.GitStatusModified
	case git.Added:
		return toolbox.GitStatusAdded
	case git.Deleted:
		return toolbox.GitStatusDeleted
	case git.Renamed:
		return toolbox.GitStatusRenamed
	case git.Copied:
		return toolbox.GitStatusCopied
	case git.UpdatedButUnmerged:
		return toolbox.GitStatusUpdatedButUnmerged
	}
	return toolbox.GitStatusUnmodified
}

func (s *Server) handleGitStatus(w http.ResponseWriter, r *http.Request) error {
	repo, err := s.openRepoQuery(r)
	if err != nil {
		return err
	}
	wt, err := repo.worktree()
	if err != nil {
		return err
	}
	st, err := wt.Status()
	if err != nil {
		return gitError(err, nil)
	}
	out := toolbox.GitStatus{FileStatus: []toolbox.GitFileStatus{}}
	for name, fst := range st {
		out.FileStatus = append(out.FileStatus, toolbox.GitFileStatus{
			Name: name, Staging: statusName(fst.Staging), Worktree: statusName(fst.Worktree), Extra: fst.Extra,
		})
	}
	sort.Slice(out.FileStatus, func(i, j int) bool { return out.FileStatus[i].Name < out.FileStatus[j].Name })
	if err := repo.tracking(&out); err != nil {
		return gitError(err, nil)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// tracking fills in the branch fields of st: the current branch (or
// detached HEAD), its upstream and how far each is ahead of the other.
func (g *gitRepo) tracking(st *toolbox.GitStatus) error {
	head, err := g.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return err
	}
	if head.Type() != plumbing.SymbolicReference {
		st.Detached = true
		st.CurrentBranch = "HEAD"
		return nil
	}
	branch := head.Target().Short()
	st.CurrentBranch = branch
	cfg, err := g.Config()
	if err != nil {
		return err
	}
	bc := cfg.Branches[branch]
	if bc == nil || bc.Remote == "" || bc.Merge == "" {
		return nil
	}
	st.Upstream = bc.Remote + "/" + bc.Merge.Short()
	up, err := g.Reference(plumbing.NewRemoteReferenceName(bc.Remote, bc.Merge.Short()), true)
	if err != nil {
		return nil // the upstream was never fetched: not published
	}
	st.BranchPublished = true
	local, err := g.Reference(head.Target(), true)
	if err != nil {
		return nil // an unborn branch
	}
	st.Ahead, st.Behind, err = g.aheadBehind(local.Hash(), up.Hash())
	return err
}

// aheadBehind counts the commits reachable from a but not b, and from b
// but not a.
func (g *gitRepo) aheadBehind(a, b plumbing.Hash) (int, int, error) {
	if a == b {
		return 0, 0, nil
	}
	ra, err := g.ancestors(a)
	if err != nil {
		return 0, 0, err
	}
	rb, err := g.ancestors(b)
	if err != nil {
		return 0, 0, err
	}
	ahead, behind := 0, 0
	for h := range ra {
		if _, ok := rb[h]; !ok {
			ahead++
		}
	}
	for h := range rb {
		if _, ok := ra[h]; !ok {
			behind++
		}
	}
	return ahead, behind, nil
}

// ancestors returns the commits reachable from h (h included). Commits
// missing from a shallow history end the walk.
func (g *gitRepo) ancestors(h plumbing.Hash) (map[plumbing.Hash]struct{}, error) {
	seen := map[plumbing.Hash]struct{}{}
	c, err := g.CommitObject(h)
	if err != nil {
		return nil, err
	}
	err = object.NewCommitPreorderIter(c, nil, nil).ForEach(func(c *object.Commit) error {
		seen[c.Hash] = struct{}{}
		return nil
	})
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		err = nil
	}
	return seen, err
}

func (s *Server) handleGitAdd(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitAddRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	repo, wt, files, err := s.openFiles(req.Path, req.Files, "add, or \".\" for all")
	if err != nil {
		return err
	}
	for _, f := range files {
		if f == "." {
			err = wt.AddWithOptions(&git.AddOptions{All: true})
		} else {
			_, err = wt.Add(f)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, index.ErrEntryNotFound) {
				return badRequest("pathspec %q did not match any files in %s", f, repo.dir)
			}
			return gitError(err, nil)
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) handleGitCommit(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitCommitRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Message) == "" {
		return badRequest("message is empty; a commit needs a message")
	}
	repo, wt, err := s.openWorktree(req.Path)
	if err != nil {
		return err
	}
	name, email := req.Author, req.Email
	if name == "" || email == "" {
		cfgName, cfgEmail := s.gitUser(repo.dir)
		if name == "" {
			name = cfgName
		}
		if email == "" {
			email = cfgEmail
		}
	}
	if name == "" || email == "" {
		return badRequest("author and email are required (or set user.name and user.email with /git/config/user)")
	}
	sig := &object.Signature{Name: name, Email: email, When: time.Now()}
	h, err := wt.Commit(req.Message, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: req.AllowEmpty})
	if errors.Is(err, git.ErrEmptyCommit) {
		return badRequest("nothing to commit in %s: stage changes with /git/add first, or set allow_empty", repo.dir)
	}
	if err != nil {
		return gitError(err, nil)
	}
	writeJSON(w, http.StatusOK, toolbox.GitCommitResponse{Hash: h.String()})
	return nil
}

func (s *Server) handleGitBranches(w http.ResponseWriter, r *http.Request) error {
	repo, err := s.openRepoQuery(r)
	if err != nil {
		return err
	}
	out := toolbox.ListBranchResponse{Branches: []string{}}
	iter, err := repo.Branches()
	if err != nil {
		return gitError(err, nil)
	}
	_ = iter.ForEach(func(ref *plumbing.Reference) error {
		out.Branches = append(out.Branches, ref.Name().Short())
		return nil
	})
	if head, err := repo.Storer.Reference(plumbing.HEAD); err == nil && head.Type() == plumbing.SymbolicReference {
		out.Current = head.Target().Short()
	}
	sort.Strings(out.Branches)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// branchRequest decodes a body naming a repository and a branch, opens the
// repository and checks the name.
func (s *Server) branchRequest(w http.ResponseWriter, r *http.Request) (*gitRepo, plumbing.ReferenceName, error) {
	var req toolbox.GitBranchRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return nil, "", err
	}
	ref := plumbing.NewBranchReferenceName(req.Name)
	if req.Name == "" || ref.Validate() != nil {
		return nil, "", badRequest("%q is not a valid branch name", req.Name)
	}
	repo, err := s.openRepo(req.Path)
	if err != nil {
		return nil, "", err
	}
	return repo, ref, nil
}

func (s *Server) handleGitCreateBranch(w http.ResponseWriter, r *http.Request) error {
	repo, ref, err := s.branchRequest(w, r)
	if err != nil {
		return err
	}
	if _, err := repo.Storer.Reference(ref); err == nil {
		return errorf(http.StatusConflict, codeGitBranchExists, "branch %q already exists in %s", ref.Short(), repo.dir)
	}
	head, err := repo.Head()
	if err != nil {
		return errorf(http.StatusConflict, codeConflict, "%s has no commit yet to start branch %q from; commit first", repo.dir, ref.Short())
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(ref, head.Hash())); err != nil {
		return gitError(err, nil)
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (s *Server) handleGitDeleteBranch(w http.ResponseWriter, r *http.Request) error {
	repo, ref, err := s.branchRequest(w, r)
	if err != nil {
		return err
	}
	if _, err := repo.Storer.Reference(ref); err != nil {
		return errorf(http.StatusNotFound, codeGitBranchNotFound, "branch %q not found in %s", ref.Short(), repo.dir)
	}
	if head, err := repo.Storer.Reference(plumbing.HEAD); err == nil && head.Target() == ref {
		return badRequest("branch %q is checked out in %s; check out another one first", ref.Short(), repo.dir)
	}
	if err := repo.Storer.RemoveReference(ref); err != nil {
		return gitError(err, nil)
	}
	// Its configuration (upstream) goes with it, as with git branch -d.
	if err := repo.DeleteBranch(ref.Short()); err != nil && !errors.Is(err, git.ErrBranchNotFound) {
		return gitError(err, nil)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleGitCheckout(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitCheckoutRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Branch == "" {
		return badRequest("branch is empty; name a branch or a commit")
	}
	repo, wt, err := s.openWorktree(req.Path)
	if err != nil {
		return err
	}
	opts, err := repo.checkoutOptions(req.Branch)
	if err != nil {
		return err
	}
	if err := wt.Checkout(opts); err != nil {
		if errors.Is(err, git.ErrUnstagedChanges) {
			return errorf(http.StatusConflict, codeGitDirtyWorktree, "%s has uncommitted changes; commit, stash or restore them before checking out %q", repo.dir, req.Branch)
		}
		return gitError(err, nil)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// checkoutOptions finds what name refers to, as git checkout does: a
// local branch; else the branch of that name of one remote, checked out
// as a new branch tracking it; else a tag or commit, checked out as a
// detached HEAD.
func (g *gitRepo) checkoutOptions(name string) (*git.CheckoutOptions, error) {
	local := plumbing.NewBranchReferenceName(name)
	if _, err := g.Storer.Reference(local); err == nil {
		return &git.CheckoutOptions{Branch: local}, nil
	}
	if remotes, err := g.Remotes(); err == nil {
		for _, rm := range remotes {
			ref, err := g.Storer.Reference(plumbing.NewRemoteReferenceName(rm.Config().Name, name))
			if err != nil {
				continue
			}
			if err := g.setUpstream(name, rm.Config().Name, name); err != nil {
				return nil, gitError(err, nil)
			}
			return &git.CheckoutOptions{Branch: local, Hash: ref.Hash(), Create: true}, nil
		}
	}
	h, err := g.ResolveRevision(plumbing.Revision(name))
	if err != nil {
		return nil, errorf(http.StatusNotFound, codeGitBranchNotFound, "no branch, tag or commit %q in %s", name, g.dir)
	}
	return &git.CheckoutOptions{Hash: *h}, nil
}

func (s *Server) handleGitHistory(w http.ResponseWriter, r *http.Request) error {
	repo, err := s.openRepoQuery(r)
	if err != nil {
		return err
	}
	out := []toolbox.GitCommitInfo{}
	if _, err := repo.Head(); err != nil {
		writeJSON(w, http.StatusOK, out) // no commit yet
		return nil
	}
	iter, err := repo.Log(&git.LogOptions{})
	if err != nil {
		return gitError(err, nil)
	}
	err = iter.ForEach(func(c *object.Commit) error {
		out = append(out, toolbox.GitCommitInfo{
			Hash: c.Hash.String(), Author: c.Author.Name, Email: c.Author.Email,
			Message: c.Message, Timestamp: c.Author.When.Format(time.RFC3339),
		})
		return nil
	})
	if err != nil && !errors.Is(err, plumbing.ErrObjectNotFound) { // a shallow history ends
		return gitError(err, nil)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
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

// resetMode maps the spec's reset modes to go-git's. keep is go-git's
// merge reset, which refuses to run over any local change (git's keep
// refuses only over changes to files the reset touches).
func resetMode(mode string) (git.ResetMode, bool) {
	switch mode {
	case "", "mixed":
		return git.MixedReset, true
	case "soft":
		return git.SoftReset, true
	case "hard":
		return git.HardReset, true
	case "merge", "keep":
		return git.MergeReset, true
	}
	return 0, false
}

func (s *Server) handleGitReset(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitResetRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	mode, ok := resetMode(req.Mode)
	if !ok {
		return badRequest("reset mode %q is not one of soft, mixed, hard, merge or keep", req.Mode)
	}
	repo, wt, err := s.openWorktree(req.Path)
	if err != nil {
		return err
	}
	target, err := repo.revision(req.Target)
	if err != nil {
		return err
	}
	opts := &git.ResetOptions{Commit: target, Mode: mode}
	if len(req.Files) > 0 {
		if mode != git.MixedReset {
			return badRequest("files can only be reset in mixed mode, not %q", req.Mode)
		}
		if opts.Files, err = relFiles(wt, req.Files); err != nil {
			return err
		}
		// Only the index changes: HEAD stays where it is.
		head, err := repo.Head()
		if err != nil {
			return gitError(err, nil)
		}
		return repo.resetFiles(w, wt, head.Hash(), target, opts.Files)
	}
	if err := wt.Reset(opts); err != nil {
		if errors.Is(err, git.ErrUnstagedChanges) {
			return errorf(http.StatusConflict, codeGitDirtyWorktree, "%s has local changes that a %s reset would lose; commit or restore them, or use a hard reset", repo.dir, req.Mode)
		}
		return gitError(err, nil)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// resetFiles resets the index entries of files to their state in target
// and leaves HEAD at head (git reset TARGET -- FILES).
func (g *gitRepo) resetFiles(w http.ResponseWriter, wt *git.Worktree, head, target plumbing.Hash, files []string) error {
	if err := wt.Reset(&git.ResetOptions{Commit: target, Mode: git.MixedReset, Files: files}); err != nil {
		return gitError(err, nil)
	}
	if err := g.moveHead(head); err != nil {
		return gitError(err, nil)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// moveHead points HEAD (its branch, when it is on one) at h.
func (g *gitRepo) moveHead(h plumbing.Hash) error {
	head, err := g.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return err
	}
	name := plumbing.HEAD
	if head.Type() == plumbing.SymbolicReference {
		name = head.Target()
	}
	return g.Storer.SetReference(plumbing.NewHashReference(name, h))
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

func (s *Server) handleGitRestore(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitRestoreRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	repo, wt, files, err := s.openFiles(req.Path, req.Files, "restore")
	if err != nil {
		return err
	}
	if !req.Staged && !req.Worktree {
		req.Worktree = true // git restore's default
	}
	if err := repo.restore(wt, files, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// setUpstream records remote/branch as the upstream of the local branch
// name.
func (g *gitRepo) setUpstream(name, remote, branch string) error {
	cfg, err := g.Config()
	if err != nil {
		return err
	}
	b := cfg.Branches[name]
	if b == nil {
		b = &config.Branch{Name: name}
		cfg.Branches[name] = b
	}
	b.Remote = remote
	b.Merge = plumbing.NewBranchReferenceName(branch)
	return g.SetConfig(cfg)
}

// gitUser returns the user.name and user.email in effect for the
// repository dir.
func (s *Server) gitUser(dir string) (name, email string) {
	return s.gitConfigValue(dir, "user.name"), s.gitConfigValue(dir, "user.email")
}
