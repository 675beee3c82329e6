package daemon

import (
	"errors"
	"net/http"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Resetting HEAD, the index and the working tree to a revision.

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
