package daemon

import (
	"errors"
	"net/http"
	"sort"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// The state of a repository: the status of its files, its branch's
// distance from its upstream, and its history.

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
