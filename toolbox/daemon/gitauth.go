package daemon

import (
	"github.com/agentbox-dev/agentbox/internal/redact"

	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Error codes of the /git routes (DaemonErrorCode in the spec).
const (
	codeGitAuthFailed      = "GIT_AUTH_FAILED"
	codeGitRepoNotFound    = "GIT_REPO_NOT_FOUND"
	codeGitBranchNotFound  = "GIT_BRANCH_NOT_FOUND"
	codeGitBranchExists    = "GIT_BRANCH_EXISTS"
	codeGitPushRejected    = "GIT_PUSH_REJECTED"
	codeGitDirtyWorktree   = "GIT_DIRTY_WORKTREE"
	codeGitMergeConflict   = "GIT_MERGE_CONFLICT"
	codeGitTransportFailed = "GIT_TRANSPORT_FAILED"
)

// gitCredentials holds what POST /git/credentials stored: in the server's
// memory only, by protocol and host, never on disk.
type gitCredentials struct {
	mu sync.Mutex
	m  map[string]gitCredential
}

type gitCredential struct{ username, password string }

func (c *gitCredentials) store(protocol, host, username, password string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]gitCredential{}
	}
	c.m[strings.ToLower(protocol+"://"+host)] = gitCredential{username, password}
}

// lookup finds the credentials stored for ep's protocol and host (with
// its port, else without).
func (c *gitCredentials) lookup(ep *transport.Endpoint) (gitCredential, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range []string{hostPort(ep), ep.Host} {
		if v, ok := c.m[strings.ToLower(ep.Protocol+"://"+h)]; ok {
			return v, true
		}
	}
	return gitCredential{}, false
}

// hostPort returns ep's host with its port when it has one.
func hostPort(ep *transport.Endpoint) string {
	if ep.Port == 0 {
		return ep.Host
	}
	return ep.Host + ":" + strconv.Itoa(ep.Port)
}

// handleGitCredentials stores credentials for a host. Unlike Daytona's
// daemon, which writes them in clear to a credential store file, this
// server keeps them in memory: they serve the remote operations of this
// server's life (until the sandbox stops) and never reach the disk.
func (s *Server) handleGitCredentials(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitAuthenticateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Username == "" && req.Password == "" {
		return badRequest("username and password are empty")
	}
	host, protocol := req.Host, req.Protocol
	if host == "" {
		host = "github.com"
	}
	if protocol == "" {
		protocol = "https"
	}
	if protocol != "https" && protocol != "http" {
		return badRequest("protocol %q is not supported; use https or http", protocol)
	}
	if strings.ContainsAny(host, "/@ \x00") {
		return badRequest("host %q is not a host name (with an optional :port)", host)
	}
	s.gitCreds.store(protocol, host, req.Username, req.Password)
	w.WriteHeader(http.StatusOK)
	return nil
}

// gitError maps an error of a git operation to an API error whose message
// shows none of secrets nor any URL's user information. The error it
// returns wraps nothing, so that no unredacted text can leak through it.
func gitError(err error, secrets []string) error {
	var he *httpError
	if errors.As(err, &he) {
		out := *he
		out.msg = redact.Text(he.Error(), secrets...)
		out.err = nil
		return &out
	}
	msg := redact.Text(err.Error(), secrets...)
	switch {
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return errorf(http.StatusNotFound, codeGitRepoNotFound, "remote repository not found: %s", msg)
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return errorf(http.StatusUnauthorized, codeGitAuthFailed, "authentication failed: %s; check the username and password (or token)", msg)
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return errorf(http.StatusForbidden, codeGitAuthFailed, "access denied: %s; the credentials are not allowed this repository", msg)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return errorf(http.StatusBadRequest, codeBadRequest, "%s: there is nothing to clone or pull yet", msg)
	case errors.Is(err, git.ErrNonFastForwardUpdate), errors.Is(err, git.ErrFastForwardMergeNotPossible):
		return errorf(http.StatusConflict, codeGitMergeConflict, "%s: the local and remote branches have diverged; only fast-forward pulls are supported, so reset or rebase first", msg)
	case errors.Is(err, git.ErrForceNeeded), strings.Contains(msg, "non-fast-forward update"):
		return errorf(http.StatusConflict, codeGitPushRejected, "push rejected: %s; pull first", msg)
	case errors.Is(err, git.ErrUnstagedChanges), errors.Is(err, git.ErrWorktreeNotClean):
		return errorf(http.StatusConflict, codeGitDirtyWorktree, "%s; commit or restore the changes first", msg)
	case errors.Is(err, plumbing.ErrReferenceNotFound), errors.Is(err, git.ErrBranchNotFound):
		return errorf(http.StatusNotFound, codeGitBranchNotFound, "%s", msg)
	case errors.Is(err, os.ErrPermission):
		return errorf(http.StatusForbidden, codeFileAccessDenied, "%s", msg)
	case isTransportError(err):
		return errorf(http.StatusInternalServerError, codeGitTransportFailed, "cannot reach the remote repository: %s", msg)
	}
	return errorf(http.StatusInternalServerError, codeInternal, "%s", msg)
}

// isTransportError reports whether err is a network failure.
func isTransportError(err error) bool {
	var ue interface{ Timeout() bool }
	return errors.As(err, &ue) || strings.Contains(err.Error(), "dial ") || strings.Contains(err.Error(), "unexpected client error") || strings.Contains(err.Error(), "status code")
}
