package daemon

import (
	"io"
	"net/http"
	"os"
	"path"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentbox-dev/agentbox/toolbox"
)

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

// A restoreEntry is a file's content in a restore source.
type restoreEntry struct {
	name string
	hash plumbing.Hash
	mode filemode.FileMode
}

// restore implements git restore [--staged] [--worktree] [--source=REV]
// FILES: the index entries of files are set from REV (HEAD by default),
// and the working tree files from REV or, without --source and
// --staged, from the index.
func (g *gitRepo) restore(wt *git.Worktree, files []string, req toolbox.GitRestoreRequest) error {
	if req.Staged {
		rev := req.Source
		if rev == "" {
			rev = "HEAD"
		}
		source, err := g.revision(rev)
		if err != nil {
			return err
		}
		head := source
		if h, err := g.Head(); err == nil {
			head = h.Hash()
		}
		if err := wt.Reset(&git.ResetOptions{Commit: source, Mode: git.MixedReset, Files: files}); err != nil {
			return gitError(err, nil)
		}
		if err := g.moveHead(head); err != nil {
			return gitError(err, nil)
		}
	}
	if !req.Worktree {
		return nil
	}
	var entries []restoreEntry
	var err error
	if req.Source != "" || req.Staged {
		entries, err = g.treeEntries(req.Source)
	} else {
		entries, err = g.indexEntries()
	}
	if err != nil {
		return err
	}
	for _, f := range files {
		matched := false
		for _, e := range entries {
			if f == "." || e.name == f || strings.HasPrefix(e.name, f+"/") {
				matched = true
				if err := g.writeEntry(wt, e); err != nil {
					return gitError(err, nil)
				}
			}
		}
		if !matched {
			return errorf(http.StatusNotFound, codeFileNotFound, "pathspec %q did not match any file known to git in %s", f, g.dir)
		}
	}
	return nil
}

// indexEntries lists the index.
func (g *gitRepo) indexEntries() ([]restoreEntry, error) {
	idx, err := g.Storer.Index()
	if err != nil {
		return nil, gitError(err, nil)
	}
	out := make([]restoreEntry, 0, len(idx.Entries))
	for _, e := range idx.Entries {
		out = append(out, restoreEntry{name: e.Name, hash: e.Hash, mode: e.Mode})
	}
	return out, nil
}

// treeEntries lists the files of revision rev (HEAD when empty).
func (g *gitRepo) treeEntries(rev string) ([]restoreEntry, error) {
	h, err := g.revision(rev)
	if err != nil {
		return nil, err
	}
	c, err := g.CommitObject(h)
	if err != nil {
		return nil, gitError(err, nil)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, gitError(err, nil)
	}
	var out []restoreEntry
	err = tree.Files().ForEach(func(f *object.File) error {
		out = append(out, restoreEntry{name: f.Name, hash: f.Hash, mode: f.Mode})
		return nil
	})
	if err != nil {
		return nil, gitError(err, nil)
	}
	return out, nil
}

// writeEntry writes e's content into the working tree.
func (g *gitRepo) writeEntry(wt *git.Worktree, e restoreEntry) error {
	blob, err := g.BlobObject(e.hash)
	if err != nil {
		return err
	}
	rd, err := blob.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	fsys := wt.Filesystem
	if err := fsys.MkdirAll(path.Dir(e.name), 0o755); err != nil {
		return err
	}
	_ = fsys.Remove(e.name)
	if e.mode == filemode.Symlink {
		target, err := io.ReadAll(rd)
		if err != nil {
			return err
		}
		return fsys.Symlink(string(target), e.name)
	}
	perm := os.FileMode(0o644)
	if e.mode == filemode.Executable {
		perm = 0o755
	}
	f, err := fsys.OpenFile(e.name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rd); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
