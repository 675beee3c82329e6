package daemon

import (
	"errors"
	"net/http"
	"sort"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Branches: listing, creating, deleting and checking them out.

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
