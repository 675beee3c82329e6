package daemon

import (
	"github.com/agentbox-dev/agentbox/internal/redact"

	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

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

// codeForbidden is the spec's error code of a 403 that no other code
// names: here, credentials the server refuses to send where asked.
const codeForbidden = "FORBIDDEN"

// gitCredentials holds the credentials the host handed in and where each
// may be sent, in the server's memory only: never on disk, where a command
// in the sandbox could read or change them.
//
// The rule (issue 24): a credential goes only to the origin (scheme, host,
// port) it was given for, never to a destination read from files the
// sandbox can write. .git/config (its url, pushurl and insteadOf, which
// go-git applies) still decides where an operation goes, but credentials
// follow only when that is their origin; go-git reads no include.path,
// http.proxy, http.extraHeader or credential helper, and neither does
// this server.
//   - hosts: credentials POST /git/credentials stored, or that a remote's
//     URL given to POST /git/remotes carried, by origin.
//   - remotes: for each repository (its resolved folder) and remote name,
//     the URL the host gave for it: the clone URL of POST /git/clone, the
//     URL of POST /git/remotes. The credentials of a pull or push request
//     go to that URL's origin only (see Server.remote).
type gitCredentials struct {
	mu      sync.Mutex
	hosts   map[string]gitCredential
	remotes map[gitRemoteKey]string
}

type gitCredential struct{ username, password string }

// gitRemoteKey names a remote of a repository.
type gitRemoteKey struct{ dir, remote string }

// store keeps credentials for origin (see gitOrigin).
func (c *gitCredentials) store(origin, username, password string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hosts == nil {
		c.hosts = map[string]gitCredential{}
	}
	c.hosts[origin] = gitCredential{username, password}
}

// lookup finds the credentials stored for exactly origin: a host's
// credentials serve no other port or scheme of it.
func (c *gitCredentials) lookup(origin string) (gitCredential, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.hosts[origin]
	return v, ok && origin != ""
}

// bind records rawURL as the URL the host gave for the remote of the
// repository at dir.
func (c *gitCredentials) bind(dir, remote, rawURL string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.remotes == nil {
		c.remotes = map[gitRemoteKey]string{}
	}
	c.remotes[gitRemoteKey{filepath.Clean(dir), remote}] = rawURL
}

// bound returns the URL the host gave for the remote of the repository at
// dir, if it gave one.
func (c *gitCredentials) bound(dir, remote string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.remotes[gitRemoteKey{filepath.Clean(dir), remote}]
	return u, ok
}

// gitOrigin returns the origin of a git URL or scp-like address, as
// "scheme://host:port" with the scheme and host in lower case and the
// scheme's default port filled in; "file://" for a local path; "" when
// raw is no git URL.
func gitOrigin(raw string) string {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return ""
	}
	if ep.Protocol == "file" {
		return "file://"
	}
	port := ""
	if ep.Port != 0 {
		port = strconv.Itoa(ep.Port)
	}
	return makeOrigin(ep.Protocol, ep.Host, port)
}

// urlOrigin returns the origin of an HTTP request's URL, in gitOrigin's
// form.
func urlOrigin(u *url.URL) string {
	if u == nil {
		return ""
	}
	return makeOrigin(u.Scheme, u.Hostname(), u.Port())
}

// makeOrigin builds an origin of a scheme, a host (an IPv6 address with or
// without brackets) and a port ("" for the scheme's default). Only ASCII
// letters are folded: a Unicode fold could join hosts DNS keeps apart.
func makeOrigin(scheme, host, port string) string {
	scheme, host = asciiLower(scheme), asciiLower(strings.Trim(host, "[]"))
	if scheme == "" || host == "" {
		return ""
	}
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		case "ssh":
			port = "22"
		case "git":
			port = "9418"
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			return ""
		}
		port = strconv.Itoa(n)
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// boundAuth is HTTP basic auth bound to one origin: go-git's HTTP
// transport asks it to authenticate every request it sends, and it does
// so only for requests to that origin. Whatever changes the destination
// during an operation (a .git/config rewritten while go-git re-reads it, a
// redirect go-git follows) gets no credentials.
type boundAuth struct {
	origin             string
	username, password string
}

// SetAuth adds the credentials to r when r goes to the bound origin.
func (a *boundAuth) SetAuth(r *http.Request) {
	if a.origin != "" && urlOrigin(r.URL) == a.origin {
		r.SetBasicAuth(a.username, a.password)
	}
}

// Name is go-git's name of the method.
func (a *boundAuth) Name() string { return "http-basic-auth" }

// String describes the method without its secret.
func (a *boundAuth) String() string { return a.Name() + " for " + a.origin }

// gitHTTP makes go-git's HTTP(S) transport check redirects with
// redirectCredentials. Like the local transport (gitlocal.go) it is
// installed in go-git's process-wide registry once, on the first remote
// operation.
var gitHTTP sync.Once

func useGitHTTP() {
	gitHTTP.Do(func() {
		c := githttp.NewClient(&http.Client{Transport: http.DefaultTransport, CheckRedirect: redirectCredentials})
		client.InstallProtocol("http", c)
		client.InstallProtocol("https", c)
	})
}

// redirectCredentials keeps a redirect to another origin (scheme, host,
// port) from carrying the credentials of the first request. go-git strips
// them on most such redirects itself, but lets them follow http on port
// 80 to https on 443 of the same host, and net/http would let them follow
// any port of the same host and its subdomains; go-git calls this hook
// before its own.
func redirectCredentials(req *http.Request, via []*http.Request) error {
	if len(via) > 0 && urlOrigin(req.URL) != urlOrigin(via[0].URL) {
		req.Header.Del("Authorization")
		if req.URL != nil {
			req.URL.User = nil
		}
	}
	return nil
}

// newBoundAuth returns credentials bound to the origin of rawURL, with the
// secrets errors must not show.
func newBoundAuth(rawURL, username, password string) gitAuth {
	a := gitAuth{auth: &boundAuth{origin: gitOrigin(rawURL), username: username, password: password}}
	for _, v := range []string{username, password} {
		if v != "" {
			a.secrets = append(a.secrets, v)
		}
	}
	return a
}

// handleGitCredentials stores credentials for an origin (protocol, host,
// port: the protocol's default port when host names none). Unlike Daytona's
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
	origin := ""
	if !strings.ContainsAny(host, "/@ \x00?#") {
		if u, err := url.Parse(protocol + "://" + host); err == nil && u.Hostname() != "" {
			origin = makeOrigin(protocol, u.Hostname(), u.Port())
		}
	}
	if origin == "" {
		return badRequest("host %q is not a host name (with an optional :port)", host)
	}
	// The credentials serve this origin only: a host given without a port
	// is the protocol's default port, not every port of the host.
	s.gitCreds.store(origin, req.Username, req.Password)
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
