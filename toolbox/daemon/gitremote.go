package daemon

import (
	"github.com/agentbox-dev/agentbox/internal/redact"

	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// A gitAuth is what a remote operation authenticates with, and the
// secrets its errors must not show.
type gitAuth struct {
	auth    transport.AuthMethod // nil: none
	secrets []string
}

// remoteURL parses a remote's URL as go-git does. Credentials in it are
// taken out: the URL returned has none (so none reaches .git/config) and
// they come back as a gitAuth. A local path (not a URL) is made absolute
// against the work dir.
func (s *Server) remoteURL(raw string) (string, gitAuth, error) {
	var a gitAuth
	if raw == "" || strings.IndexByte(raw, 0) >= 0 {
		return "", a, badRequest("url is empty or contains a NUL byte")
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return "", a, badRequest("%q is not a git URL or path: %s", redact.Text(raw), redact.Text(err.Error()))
	}
	if ep.Protocol == "file" {
		// go-git makes a relative path absolute against the server's own
		// cwd: it is the work dir's instead.
		if !strings.HasPrefix(raw, "file://") && !filepath.IsAbs(raw) {
			return filepath.Join(s.workDir, raw), a, nil
		}
		return raw, a, nil
	}
	// An http(s) URL's user info is a credential, the user name too: a
	// token is often given as https://TOKEN@host/… with no password.
	// They are bound to the URL's origin.
	if (ep.Protocol == "http" || ep.Protocol == "https") && (ep.User != "" || ep.Password != "") {
		a = newBoundAuth(raw, ep.User, ep.Password)
		u, err := url.Parse(raw)
		if err != nil {
			return "", gitAuth{}, badRequest("%q is not a valid URL", redact.Text(raw))
		}
		u.User = nil
		raw = u.String()
	}
	return raw, a, nil
}

// authFor chooses the credentials of a remote operation on rawURL: those
// of the request (username, password), else those the URL carried (in a),
// else those stored with POST /git/credentials for its origin. Every one
// is bound to rawURL's origin (see boundAuth), so rawURL must be where the
// host gave the credentials for: a URL of the request, or one checked
// against it (Server.remote), never one read from the repository alone.
func (s *Server) authFor(rawURL, username, password string, a gitAuth) gitAuth {
	if password != "" || username != "" {
		b := newBoundAuth(rawURL, username, password)
		b.secrets = append(b.secrets, a.secrets...)
		return b
	}
	if a.auth != nil {
		return a
	}
	if c, ok := s.gitCreds.lookup(gitOrigin(rawURL)); ok {
		return newBoundAuth(rawURL, c.username, c.password)
	}
	return a
}

// gitContext returns a context that ends with the request or when the
// server closes. Every remote operation starts with it, so it also makes
// sure go-git's HTTP transport checks redirects (useGitHTTP).
func (s *Server) gitContext(r *http.Request) (context.Context, context.CancelFunc) {
	useGitHTTP()
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (s *Server) handleGitClone(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitCloneRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	secrets := []string{req.Password}
	if req.Depth < 0 {
		return badRequest("depth must not be negative, got %d", req.Depth)
	}
	src, a, err := s.remoteURL(req.URL)
	if err != nil {
		return err
	}
	a = s.authFor(src, req.Username, req.Password, a)
	a.secrets = append(a.secrets, secrets...)
	if req.Branch != "" && plumbing.NewBranchReferenceName(req.Branch).Validate() != nil {
		return badRequest("%q is not a valid branch name", req.Branch)
	}
	sp, err := s.resolve(req.Path)
	if err != nil {
		return err
	}
	made, err := s.cloneTarget(sp)
	if err != nil {
		return err
	}
	// Leave nothing behind on failure: what the clone made goes, a folder
	// that was there empty stays empty. Both by descriptor, in the root.
	cleanUp := func() {
		if made != "" {
			_ = s.root.removeAll(made)
		} else {
			s.root.emptyDir(sp)
		}
	}
	// go-git takes a path string: make the target in the root, then hand
	// it the kernel's name of the folder made there.
	dir, err := s.gitPath(sp, true)
	if err != nil {
		cleanUp()
		return err
	}
	from, err := s.localRemote(src)
	if err != nil {
		cleanUp()
		return err
	}
	opts := &git.CloneOptions{URL: from, Auth: a.auth, Depth: req.Depth, InsecureSkipTLS: req.InsecureSkipTLS, Tags: git.TagFollowing}
	if isLocal(src) {
		s.useLocalTransport()
		opts.Depth = 0 // as git does for local clones: the objects are here anyway
	}
	if req.Branch != "" {
		opts.ReferenceName = plumbing.NewBranchReferenceName(req.Branch)
	}
	ctx, cancel := s.gitContext(r)
	defer cancel()
	err = s.clone(ctx, dir, opts, req.CommitID, src)
	if err == nil {
		// The clone URL is where credentials for this repository's origin
		// remote were given for, whatever .git/config says later.
		s.gitCreds.bind(dir, git.DefaultRemoteName, src)
	}
	if err != nil {
		cleanUp()
		return gitError(err, a.secrets)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// clone clones into dir and checks out commit when it is not empty. The
// origin remote's URL is set to url, the one the request gave, when go-git
// cloned from another name of it (a local path resolved in the root).
func (s *Server) clone(ctx context.Context, dir string, opts *git.CloneOptions, commit, url string) error {
	repo, err := git.PlainCloneContext(ctx, dir, false, opts)
	if errors.Is(err, plumbing.ErrReferenceNotFound) && opts.ReferenceName != "" {
		return errorf(http.StatusNotFound, codeGitBranchNotFound, "branch %q not found in the remote repository", opts.ReferenceName.Short())
	}
	if err != nil {
		return err
	}
	if url != opts.URL {
		cfg, err := repo.Config()
		if err != nil {
			return err
		}
		if rc := cfg.Remotes[git.DefaultRemoteName]; rc != nil {
			rc.URLs = []string{url}
			if err := repo.SetConfig(cfg); err != nil {
				return err
			}
		}
	}
	if commit == "" {
		return nil
	}
	h, err := repo.ResolveRevision(plumbing.Revision(commit))
	if err != nil {
		return errorf(http.StatusNotFound, codeNotFound, "commit %q not found in the cloned history (a shallow clone may not reach it)", commit)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	return wt.Checkout(&git.CheckoutOptions{Hash: *h, Force: true})
}

// cloneTarget checks that the sandbox path p can receive a clone: it must
// not exist or be an empty folder (looked at inside the root). It returns
// the topmost folder the clone will create ("" when p exists), which a
// failed clone removes.
func (s *Server) cloneTarget(p string) (string, error) {
	names, err := s.root.readDirNames(p, 1)
	switch {
	case err == nil && len(names) > 0:
		return "", errorf(http.StatusConflict, codeConflict, "destination %q already exists and is not an empty folder; choose another path", p)
	case err == nil:
		return "", nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fsError(p, err)
	}
	made := p
	for q := path.Dir(p); q != made; q = path.Dir(q) {
		if _, err := s.root.lstat(q); err == nil {
			break
		}
		made = q
	}
	return made, nil
}

// localRemote returns the URL go-git is to use for the remote URL u: u
// itself unless it is a local path or file:// URL, whose path is the
// sandbox's to shape (a link in it, or the URL itself read from
// .git/config), so it is resolved inside the root and go-git gets the
// kernel's name of the folder found (fsRoot.hostPath), as a path.
func (s *Server) localRemote(u string) (string, error) {
	ep, err := transport.NewEndpoint(u)
	if err != nil || ep.Protocol != "file" {
		return u, nil
	}
	p := path.Clean(ep.Path)
	if !path.IsAbs(p) {
		p = path.Join(s.workDir, p)
	}
	host, err := s.root.hostPath(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errorf(http.StatusNotFound, codeGitRepoNotFound, "%q is not a git repository; clone or init one first", p)
	}
	if err != nil {
		return "", fsError(p, err)
	}
	return host, nil
}

// isLocal reports whether a remote URL is a local path or file:// URL.
func isLocal(u string) bool {
	ep, err := transport.NewEndpoint(u)
	return err == nil && ep.Protocol == "file"
}

// remote returns the URL a fetch (or, with push, a push) of the named
// remote of repo ("origin" when empty) goes to, as go-git would choose it
// from .git/config (insteadOf applied; a push takes the last URL, a
// pushurl when there is one), and the credentials to send there. A local
// path comes back resolved inside the root (localRemote).
//
// That URL is the sandbox's to change, so the credentials of the request
// (username, password) go there only when its origin is the origin of the
// URL the host gave for the remote (the clone URL, or one set with POST
// /git/remotes); else the answer is 403 naming both origins, and nothing
// is sent. Without credentials in the request, the operation goes where
// .git/config says, as before, with the credentials stored for that
// origin, if any (they were given for it).
func (s *Server) remote(repo *gitRepo, name, username, password string, push bool) (string, string, gitAuth, error) {
	if name == "" {
		name = git.DefaultRemoteName
	}
	rm, err := repo.Remote(name)
	if err != nil {
		return "", "", gitAuth{}, errorf(http.StatusNotFound, codeNotFound, "remote %q not found in %s; add it with /git/remotes", name, repo.dir)
	}
	urls := rm.Config().URLs
	if len(urls) == 0 {
		return "", "", gitAuth{}, badRequest("remote %q of %s has no URL; set one with /git/remotes", name, repo.dir)
	}
	u := urls[0]
	if push {
		u = urls[len(urls)-1]
	}
	// go-git is to go to target: u, or for a local path the folder it
	// names resolved inside the root.
	target := u
	if isLocal(u) {
		s.useLocalTransport()
		if target, err = s.localRemote(u); err != nil {
			return "", "", gitAuth{}, err
		}
	}
	if username == "" && password == "" {
		return name, target, s.authFor(u, "", "", gitAuth{}), nil
	}
	given, ok := s.gitCreds.bound(repo.dir, name)
	if !ok {
		return "", "", gitAuth{}, errorf(http.StatusForbidden, codeForbidden,
			"credentials for remote %q of %s are bound to no URL: this server sends credentials only to the origin of a URL the host gave for the remote "+
				"(the clone URL of /git/clone, or a URL set with /git/remotes), and this repository or remote came otherwise; "+
				"set its URL with /git/remotes (overwrite), or store the credentials for %s with /git/credentials and leave them out of the request; nothing was sent",
			name, repo.dir, originText(u))
	}
	if want, got := gitOrigin(given), gitOrigin(u); want == "" || got != want {
		return "", "", gitAuth{}, errorf(http.StatusForbidden, codeForbidden,
			"remote %q of %s now points to %s, but the credentials were given for %s (the URL the host gave for it); "+
				"credentials go only to the origin they were given for, so nothing was sent: "+
				"set the remote's URL back with /git/remotes (overwrite), or pull/push without credentials",
			name, repo.dir, originText(u), originText(given))
	}
	return name, target, s.authFor(given, username, password, gitAuth{}), nil
}

// originText names the origin of a URL in an error message: the origin,
// or for a local path (or no URL at all) the text, any user information
// redacted.
func originText(raw string) string {
	if o := gitOrigin(raw); o != "" && o != "file://" {
		return o
	}
	return redact.Text(raw)
}

// currentBranch returns the branch HEAD is on, or 400 when it is detached.
func (g *gitRepo) currentBranch() (string, error) {
	head, err := g.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return "", gitError(err, nil)
	}
	if head.Type() != plumbing.SymbolicReference {
		return "", badRequest("HEAD of %s is detached; name the branch or check one out", g.dir)
	}
	return head.Target().Short(), nil
}

func (s *Server) handleGitPush(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitPushRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	repo, err := s.openRepo(req.Path)
	if err != nil {
		return err
	}
	branch := req.Branch
	if branch == "" {
		if branch, err = repo.currentBranch(); err != nil {
			return err
		}
	}
	name, u, a, err := s.remote(repo, req.Remote, req.Username, req.Password, true)
	if err != nil {
		return err
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if _, err := repo.Storer.Reference(ref); err != nil {
		return errorf(http.StatusNotFound, codeGitBranchNotFound, "branch %q not found in %s", branch, repo.dir)
	}
	ctx, cancel := s.gitContext(r)
	defer cancel()
	spec := config.RefSpec(ref.String() + ":" + ref.String())
	// RemoteURL: the URL checked, not one go-git would read again.
	err = repo.PushContext(ctx, &git.PushOptions{RemoteName: name, RemoteURL: u, RefSpecs: []config.RefSpec{spec}, Auth: a.auth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return gitError(err, a.secrets)
	}
	if req.SetUpstream {
		if err := repo.setUpstream(branch, name, branch); err != nil {
			return gitError(err, a.secrets)
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) handleGitPull(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitPullRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	repo, wt, err := s.openWorktree(req.Path)
	if err != nil {
		return err
	}
	current, err := repo.currentBranch()
	if err != nil {
		return err
	}
	remoteName, branch := req.Remote, req.Branch
	if cfg, err := repo.Config(); err == nil && cfg.Branches[current] != nil {
		up := cfg.Branches[current]
		if remoteName == "" {
			remoteName = up.Remote
		}
		if branch == "" && up.Merge != "" {
			branch = up.Merge.Short()
		}
	}
	if branch == "" {
		branch = current
	}
	name, u, a, err := s.remote(repo, remoteName, req.Username, req.Password, false)
	if err != nil {
		return err
	}
	ctx, cancel := s.gitContext(r)
	defer cancel()
	// RemoteURL: the URL checked, not one go-git would read again.
	err = wt.PullContext(ctx, &git.PullOptions{RemoteName: name, RemoteURL: u, ReferenceName: plumbing.NewBranchReferenceName(branch), Auth: a.auth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return gitError(err, a.secrets)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) handleGitRemotes(w http.ResponseWriter, r *http.Request) error {
	repo, err := s.openRepoQuery(r)
	if err != nil {
		return err
	}
	remotes, err := repo.Remotes()
	if err != nil {
		return gitError(err, nil)
	}
	out := toolbox.ListRemotesResponse{Remotes: []toolbox.GitRemote{}}
	for _, rm := range remotes {
		c := rm.Config()
		out.Remotes = append(out.Remotes, toolbox.GitRemote{Name: c.Name, URL: redact.Text(c.URLs[0])})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleGitAddRemote(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitAddRemoteRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	rc := &config.RemoteConfig{Name: req.Name}
	u, a, err := s.remoteURL(req.URL)
	if err != nil {
		return err
	}
	rc.URLs = []string{u}
	if err := rc.Validate(); err != nil {
		return badRequest("remote %q: %s", req.Name, err)
	}
	repo, err := s.openRepo(req.Path)
	if err != nil {
		return err
	}
	if a.auth != nil {
		// The URL carried credentials: they are kept in memory for its
		// host (as POST /git/credentials does), never in .git/config.
		if ep, err := transport.NewEndpoint(req.URL); err == nil {
			s.gitCreds.store(gitOrigin(u), ep.User, ep.Password)
		}
	}
	if _, err := repo.Remote(req.Name); err == nil {
		if !req.Overwrite {
			return errorf(http.StatusConflict, codeConflict, "remote %q already exists in %s; set overwrite to replace it", req.Name, repo.dir)
		}
		if err := repo.DeleteRemote(req.Name); err != nil {
			return gitError(err, a.secrets)
		}
	}
	rm, err := repo.CreateRemote(rc)
	if err != nil {
		return gitError(err, a.secrets)
	}
	// The host gave this URL for the remote: credentials of later pulls
	// and pushes may go to its origin.
	s.gitCreds.bind(repo.dir, req.Name, u)
	if req.Fetch {
		target := u
		if isLocal(u) {
			s.useLocalTransport()
			if target, err = s.localRemote(u); err != nil {
				return err
			}
		}
		a = s.authFor(u, "", "", a)
		ctx, cancel := s.gitContext(r)
		defer cancel()
		if err := rm.FetchContext(ctx, &git.FetchOptions{RemoteURL: target, Auth: a.auth}); err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return gitError(err, a.secrets)
		}
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}
