package toolbox

import (
	"github.com/agentbox-dev/agentbox/internal/redact"

	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Git operations of the toolbox API (/git). Paths name repositories in
// the sandbox: relative ones are taken from the server's work dir.

// GitClone clones req.URL into req.Path (POST /git/clone). The password
// (req.Password, or one in the URL) never appears in the error.
func (c *Client) GitClone(ctx context.Context, req GitCloneRequest) error {
	if req.URL == "" {
		return fmt.Errorf("toolbox: git clone: URL is empty: %w", sandbox.ErrInvalidArgument)
	}
	if err := checkPath("git clone path", req.Path); err != nil {
		return err
	}
	err := c.doJSON(ctx, http.MethodPost, "/git/clone", nil, req, nil, nil)
	return redactError(err, req.Password, urlPassword(req.URL))
}

// GitStatus describes the working tree and branch of the repository at
// path (GET /git/status).
func (c *Client) GitStatus(ctx context.Context, path string) (*GitStatus, error) {
	var st GitStatus
	if err := c.gitGet(ctx, "/git/status", path, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// GitAdd stages files of the repository at path ("." for all) (POST
// /git/add).
func (c *Client) GitAdd(ctx context.Context, path string, files ...string) error {
	if len(files) == 0 {
		return fmt.Errorf("toolbox: git add: no files given: %w", sandbox.ErrInvalidArgument)
	}
	return c.gitPost(ctx, "/git/add", path, GitAddRequest{Path: path, Files: files}, nil)
}

// GitCommit commits what is staged and returns the new commit's hash (POST
// /git/commit). Empty Author and Email fall back to the configured
// user.name and user.email.
func (c *Client) GitCommit(ctx context.Context, req GitCommitRequest) (string, error) {
	var r GitCommitResponse
	if err := c.gitPost(ctx, "/git/commit", req.Path, req, &r); err != nil {
		return "", err
	}
	return r.Hash, nil
}

// GitPush pushes a branch (POST /git/push).
func (c *Client) GitPush(ctx context.Context, req GitPushRequest) error {
	return redactError(c.gitPost(ctx, "/git/push", req.Path, req, nil), req.Password)
}

// GitPull fast-forwards the current branch from its remote (POST
// /git/pull).
func (c *Client) GitPull(ctx context.Context, req GitPullRequest) error {
	return redactError(c.gitPost(ctx, "/git/pull", req.Path, req, nil), req.Password)
}

// GitBranches lists the local branches (GET /git/branches).
func (c *Client) GitBranches(ctx context.Context, path string) (*ListBranchResponse, error) {
	var r ListBranchResponse
	if err := c.gitGet(ctx, "/git/branches", path, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GitCreateBranch creates branch name at HEAD without checking it out
// (POST /git/branches).
func (c *Client) GitCreateBranch(ctx context.Context, path, name string) error {
	return c.gitPost(ctx, "/git/branches", path, GitBranchRequest{Path: path, Name: name}, nil)
}

// GitDeleteBranch deletes branch name (DELETE /git/branches).
func (c *Client) GitDeleteBranch(ctx context.Context, path, name string) error {
	if err := checkPath("git repository path", path); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, "/git/branches", nil, GitDeleteBranchRequest{Path: path, Name: name}, nil, nil)
}

// GitCheckout checks out a branch, remote branch, tag or commit (POST
// /git/checkout).
func (c *Client) GitCheckout(ctx context.Context, path, branch string) error {
	return c.gitPost(ctx, "/git/checkout", path, GitCheckoutRequest{Path: path, Branch: branch}, nil)
}

// GitHistory lists the commits reachable from HEAD, newest first (GET
// /git/history).
func (c *Client) GitHistory(ctx context.Context, path string) ([]GitCommitInfo, error) {
	var h []GitCommitInfo
	if err := c.gitGet(ctx, "/git/history", path, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// GitInit creates a repository (POST /git/init).
func (c *Client) GitInit(ctx context.Context, req GitInitRequest) error {
	return c.gitPost(ctx, "/git/init", req.Path, req, nil)
}

// GitRemotes lists the remotes (GET /git/remotes).
func (c *Client) GitRemotes(ctx context.Context, path string) ([]GitRemote, error) {
	var r ListRemotesResponse
	if err := c.gitGet(ctx, "/git/remotes", path, &r); err != nil {
		return nil, err
	}
	return r.Remotes, nil
}

// GitAddRemote adds a remote (POST /git/remotes).
func (c *Client) GitAddRemote(ctx context.Context, req GitAddRemoteRequest) error {
	return redactError(c.gitPost(ctx, "/git/remotes", req.Path, req, nil), urlPassword(req.URL))
}

// GitReset resets HEAD, the index and the working tree as req.Mode says
// (POST /git/reset).
func (c *Client) GitReset(ctx context.Context, req GitResetRequest) error {
	return c.gitPost(ctx, "/git/reset", req.Path, req, nil)
}

// GitRestore restores files of the working tree or the index (POST
// /git/restore).
func (c *Client) GitRestore(ctx context.Context, req GitRestoreRequest) error {
	return c.gitPost(ctx, "/git/restore", req.Path, req, nil)
}

// GitConfig returns the value of a config key at scope ("" global, local
// with the repository at path, or system) and whether it is set (GET
// /git/config).
func (c *Client) GitConfig(ctx context.Context, key, scope, path string) (string, bool, error) {
	q := url.Values{"key": {key}}
	if scope != "" {
		q.Set("scope", scope)
	}
	if path != "" {
		q.Set("path", path)
	}
	var r GitConfigResponse
	if err := c.doJSON(ctx, http.MethodGet, "/git/config", q, nil, nil, &r); err != nil {
		return "", false, err
	}
	if r.Value == nil {
		return "", false, nil
	}
	return *r.Value, true, nil
}

// GitSetConfig sets a config key (POST /git/config).
func (c *Client) GitSetConfig(ctx context.Context, req GitSetConfigRequest) error {
	return c.doJSON(ctx, http.MethodPost, "/git/config", nil, req, nil, nil)
}

// GitConfigureUser sets user.name and user.email (POST /git/config/user).
func (c *Client) GitConfigureUser(ctx context.Context, req GitConfigureUserRequest) error {
	return c.doJSON(ctx, http.MethodPost, "/git/config/user", nil, req, nil, nil)
}

// GitSetCredentials gives the server credentials for a host's remote
// operations (POST /git/credentials). An agentbox server keeps them in
// memory; Daytona's daemon writes them in clear to a file in the sandbox.
func (c *Client) GitSetCredentials(ctx context.Context, req GitAuthenticateRequest) error {
	return redactError(c.doJSON(ctx, http.MethodPost, "/git/credentials", nil, req, nil, nil), req.Password)
}

// gitGet GETs a route taking a repository path and decodes the answer.
func (c *Client) gitGet(ctx context.Context, route, path string, out any) error {
	if err := checkPath("git repository path", path); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodGet, route, url.Values{"path": {path}}, nil, nil, out)
}

// gitPost POSTs req to a route taking a repository path.
func (c *Client) gitPost(ctx context.Context, route, path string, req, out any) error {
	if err := checkPath("git repository path", path); err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodPost, route, nil, req, nil, out)
}

// urlPassword returns the password in a URL's user information, if any.
func urlPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// redactError removes secrets from err's text: from an *APIError's
// message and body (a server may echo a request), else by wrapping err
// with a redacted message.
func redactError(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	var ae *APIError
	if errors.As(err, &ae) {
		ae.Message = redact.Secrets(ae.Message, secrets...)
		ae.Body = redact.SecretsBytes(ae.Body, secrets...)
		return err
	}
	msg := redact.Secrets(err.Error(), secrets...)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// redactedError shows a redacted message for err; errors.Is and As still
// see err.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
