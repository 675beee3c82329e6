package daemon

import (
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Staging and committing.

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

// gitUser returns the user.name and user.email in effect for the
// repository dir.
func (s *Server) gitUser(dir string) (name, email string) {
	return s.gitConfigValue(dir, "user.name"), s.gitConfigValue(dir, "user.email")
}
