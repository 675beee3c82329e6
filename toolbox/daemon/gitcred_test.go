package daemon

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Credentials of the tests of this file: distinctive, so that no commit
// or packet holds them by chance.
const (
	credUser     = "user-Secret-3141"
	credPassword = "pw-Secret-2718"
)

// A capture is a listener on 127.0.0.1 standing for one a command in the
// sandbox would start: it records every request it receives (request
// line, headers, body) and answers 401 asking for basic auth, fishing for
// credentials.
type capture struct {
	url  string
	mu   sync.Mutex
	reqs []string
}

func newCapture(t *testing.T) *capture {
	t.Helper()
	c := &capture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, err := httputil.DumpRequest(r, true)
		if err != nil {
			dump = []byte(r.Method + " " + r.RequestURI + " (body unreadable)")
		}
		c.mu.Lock()
		c.reqs = append(c.reqs, string(dump))
		c.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="fishing"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// count returns how many requests the listener received.
func (c *capture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reqs)
}

// noSecrets fails when a request the listener received carried an
// Authorization header or the credentials, in clear or in base64.
func (c *capture) noSecrets(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.reqs {
		if hasSecret(d) || strings.Contains(strings.ToLower(d), "authorization:") {
			t.Errorf("the capturing listener received credentials:\n%s", d)
		}
	}
}

// hasSecret reports whether s holds the test credentials in any form.
func hasSecret(s string) bool {
	b64 := base64.StdEncoding.EncodeToString([]byte(credUser + ":" + credPassword))
	return strings.Contains(s, credUser) || strings.Contains(s, credPassword) || strings.Contains(s, b64)
}

// credEnv is a server with a repository it cloned with credentials from a
// real git server on loopback that requires them.
type credEnv struct {
	*testEnv
	tr      *testRepo
	base    string // the git server's URL
	repoURL string // base + "/repo.git"
	dir     string // the clone, "c" in the work dir
	seen    *[]string
}

// newCredEnv serves the test repository behind basic auth (with extra
// routes in mux, when given, in front of it), clones it with credentials
// into "c" and checks the clone (the control: the credentials work).
func newCredEnv(t *testing.T, extra func(mux *http.ServeMux)) *credEnv {
	t.Helper()
	tr := newTestRepo(t)
	var mu sync.Mutex
	seen := []string{}
	git := gitHandler(t, tr.root, credUser, credPassword)
	mux := http.NewServeMux()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for k, v := range r.Header {
			seen = append(seen, k+": "+strings.Join(v, ","))
		}
		mu.Unlock()
		git.ServeHTTP(w, r)
	}))
	if extra != nil {
		extra(mux)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e := &credEnv{testEnv: newErrEnv(t), tr: tr, base: srv.URL, repoURL: srv.URL + "/repo.git", seen: &seen}
	e.dir = filepath.Join(e.work, "c")
	e.expect(http.StatusOK, "POST", "/git/clone", toolbox.GitCloneRequest{URL: e.repoURL, Path: "c", Username: credUser, Password: credPassword})
	if h := e.history("c"); len(h) != 2 || h[0].Hash != tr.second {
		t.Fatalf("history of the clone with credentials: %+v", h)
	}
	return e
}

// commit makes a commit in the clone, for a push to carry.
func (e *credEnv) commit(name string) {
	e.t.Helper()
	write(e.t.(*testing.T), filepath.Join(e.dir, name), name+"\n")
	e.expect(http.StatusOK, "POST", "/git/add", toolbox.GitAddRequest{Path: "c", Files: []string{"."}})
	e.expect(http.StatusOK, "POST", "/git/commit", toolbox.GitCommitRequest{Path: "c", Message: name, Author: "Ann", Email: "ann@example.com"})
}

// sandboxGit runs git in the clone as a command in the sandbox would,
// changing its .git/config.
func (e *credEnv) sandboxGit(args ...string) {
	e.t.Helper()
	runGit(e.t, e.dir, args...)
}

var (
	pullWithCreds = toolbox.GitPullRequest{Path: "c", Username: credUser, Password: credPassword}
	pushWithCreds = toolbox.GitPushRequest{Path: "c", Username: credUser, Password: credPassword}
)

// refused checks the answer to a pull or push with credentials to a
// remote that no longer points where they were given for: 403 naming
// both origins, without the credentials.
func (e *credEnv) refused(route string, body any, to string) {
	e.t.Helper()
	er := e.expectError(http.StatusForbidden, codeForbidden, "POST", route, body)
	from := strings.ToLower(e.base)
	u, _ := url.Parse(to)
	if !strings.Contains(er.Message, from) || !strings.Contains(er.Message, "http://"+u.Host) || hasSecret(er.Message) {
		e.t.Fatalf("%s answer %q: want both origins (%s, %s), no credentials", route, er.Message, from, u.Host)
	}
}

// TestGitCredsRewrittenOrigin: a command in the sandbox points origin at
// a listener of its own by writing .git/config. A pull or push with the
// credentials the repository was cloned with is refused with 403 naming
// both origins, and the listener receives nothing; without credentials
// the pull goes there as before (the control: the rewrite took effect).
func TestGitCredsRewrittenOrigin(t *testing.T) {
	e := newCredEnv(t, nil)
	c := newCapture(t)
	e.commit("one.txt")
	e.expect(http.StatusOK, "POST", "/git/push", pushWithCreds) // control: push works
	if got := runGit(t, e.tr.bare, "rev-parse", "main"); got == e.tr.second {
		t.Fatal("the push with credentials did not reach the git server")
	}

	e.sandboxGit("config", "remote.origin.url", c.url+"/repo.git")
	e.commit("two.txt")
	e.refused("/git/pull", pullWithCreds, c.url)
	e.refused("/git/push", pushWithCreds, c.url)
	if n := c.count(); n != 0 {
		t.Fatalf("the listener received %d requests from a refused pull/push", n)
	}

	_, body := e.do("POST", "/git/pull", toolbox.GitPullRequest{Path: "c"})
	if !strings.Contains(string(body), codeGitAuthFailed) || c.count() == 0 {
		t.Fatalf("a pull without credentials did not go to the rewritten origin (%d requests): %s", c.count(), body)
	}
	c.noSecrets(t)
	noSecretOnDisk(t, e.work, credPassword)
}

// TestGitCredsPushURL: a pushurl added to .git/config takes a push
// elsewhere (go-git pushes to the last URL); a push with credentials is
// refused and sends nothing there. The fetch URL is untouched, so a pull
// with them still works; a push without them goes to the pushurl.
func TestGitCredsPushURL(t *testing.T) {
	e := newCredEnv(t, nil)
	c := newCapture(t)
	e.sandboxGit("config", "remote.origin.pushurl", c.url+"/repo.git")
	e.commit("one.txt")
	e.refused("/git/push", pushWithCreds, c.url)
	if n := c.count(); n != 0 {
		t.Fatalf("the listener received %d requests from a refused push", n)
	}
	e.expect(http.StatusOK, "POST", "/git/pull", pullWithCreds)
	_, body := e.do("POST", "/git/push", toolbox.GitPushRequest{Path: "c"})
	if c.count() == 0 {
		t.Fatalf("a push without credentials did not go to the pushurl: %s", body)
	}
	c.noSecrets(t)
}

// TestGitCredsInsteadOf: url.<listener>.insteadOf in .git/config rewrites
// the origin go-git goes to; pull and push with credentials are refused
// and the listener receives nothing; without credentials the pull goes
// there (the control). An include.path to a file the sandbox wrote, with
// the same rewrite, sends the credentials nowhere either: go-git does not
// follow includes (git does, the control shows), so they go to the real
// server.
func TestGitCredsInsteadOf(t *testing.T) {
	e := newCredEnv(t, nil)
	c := newCapture(t)
	e.sandboxGit("config", "url."+c.url+"/.insteadOf", e.base+"/")
	e.commit("one.txt")
	e.refused("/git/pull", pullWithCreds, c.url)
	e.refused("/git/push", pushWithCreds, c.url)
	if n := c.count(); n != 0 {
		t.Fatalf("the listener received %d requests from a refused pull/push", n)
	}
	e.do("POST", "/git/pull", toolbox.GitPullRequest{Path: "c"})
	if c.count() == 0 {
		t.Fatal("a pull without credentials did not go where insteadOf points")
	}
	c.noSecrets(t)

	e.sandboxGit("config", "--unset", "url."+c.url+"/.insteadOf")
	inc := filepath.Join(t.TempDir(), "inc.config")
	write(t, inc, "[url \""+c.url+"/\"]\n\tinsteadOf = "+e.base+"/\n")
	e.sandboxGit("config", "include.path", inc)
	if got := runGit(t, e.dir, "remote", "get-url", "origin"); !strings.HasPrefix(got, c.url) {
		t.Fatalf("control: git sees origin %q through the include, want the listener", got)
	}
	before := c.count()
	_, body := e.do("POST", "/git/push", pushWithCreds)
	if c.count() != before {
		t.Fatalf("a push with credentials went through the include to the listener: %s", body)
	}
	if got := runGit(t, e.tr.bare, "rev-parse", "main"); got == e.tr.second {
		t.Fatalf("the push with credentials did not reach the git server: %s", body)
	}
	c.noSecrets(t)
}

// TestGitCredsRedirect: the git server's origin redirects to the listener.
// A clone with credentials and a pull with them (origin pointed by the
// sandbox at the redirecting path, same origin) follow the redirect (the
// control: the listener receives requests) without the credentials.
func TestGitCredsRedirect(t *testing.T) {
	c := newCapture(t)
	e := newCredEnv(t, func(mux *http.ServeMux) {
		mux.HandleFunc("/moved/", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, c.url+strings.TrimPrefix(r.URL.RequestURI(), "/moved"), http.StatusTemporaryRedirect)
		})
	})
	moved := e.base + "/moved/repo.git"
	_, body := e.do("POST", "/git/clone", toolbox.GitCloneRequest{URL: moved, Path: "m", Username: credUser, Password: credPassword})
	if c.count() == 0 || hasSecret(string(body)) {
		t.Fatalf("the clone did not follow the redirect (%d requests), or its answer shows a credential: %s", c.count(), body)
	}
	c.noSecrets(t)

	before := c.count()
	e.sandboxGit("config", "remote.origin.url", moved)
	_, body = e.do("POST", "/git/pull", pullWithCreds)
	if c.count() == before || hasSecret(string(body)) {
		t.Fatalf("the pull did not follow the redirect, or its answer shows a credential: %s", body)
	}
	c.noSecrets(t)
}

// TestGitCredsConfigIgnored: http.proxy, http.extraHeader and a
// credential helper in .git/config, as a command in the sandbox would set
// them, are not used by a pull with credentials: it fetches from the git
// server directly, the proxy receives nothing, the header is not sent and
// the helper never runs. The control: git itself, with the same config,
// goes through the proxy and runs the helper.
func TestGitCredsConfigIgnored(t *testing.T) {
	e := newCredEnv(t, nil)
	c := newCapture(t)
	helperOut := filepath.Join(t.TempDir(), "helper.out")
	e.sandboxGit("config", "http.proxy", c.url)
	e.sandboxGit("config", "http.extraHeader", "X-Probe: sandbox-header")
	e.sandboxGit("config", "credential.helper", "!f() { cat > '"+helperOut+"'; }; f")

	// A commit on the server for the pull to fetch.
	work := filepath.Join(e.tr.root, "work")
	write(t, filepath.Join(work, "README"), "three\n")
	runGit(t, work, "commit", "-q", "-am", "third")
	runGit(t, work, "push", "-q", e.tr.bare, "main")
	third := runGit(t, work, "rev-parse", "HEAD")

	e.expect(http.StatusOK, "POST", "/git/pull", pullWithCreds)
	if h := e.history("c"); len(h) == 0 || h[0].Hash != third {
		t.Fatalf("the pull did not fetch the new commit: %+v", h)
	}
	if n := c.count(); n != 0 {
		t.Fatalf("the proxy of .git/config received %d requests", n)
	}
	for _, h := range *e.seen {
		if strings.Contains(h, "sandbox-header") {
			t.Fatalf("the git server received the extraHeader of .git/config: %s", h)
		}
	}
	if _, err := os.Stat(helperOut); !os.IsNotExist(err) {
		t.Fatalf("the credential helper of .git/config ran (err %v)", err)
	}

	// The control: git honours the same configuration.
	cmd := exec.Command("git", "fetch", "origin")
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "HOME="+e.dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0", "NO_PROXY=", "no_proxy=", "GIT_ASKPASS=", "SSH_ASKPASS=")
	out, err := cmd.CombinedOutput()
	if err == nil || c.count() == 0 {
		t.Fatalf("control: git fetch through the proxy of .git/config (%d requests): %v: %s", c.count(), err, out)
	}
	if _, err := os.Stat(helperOut); err != nil {
		t.Fatalf("control: git did not run the credential helper: %v (%s)", err, out)
	}
}

// TestGitCredsUnbound: a repository the sandbox cloned itself (not
// through /git/clone) has no URL the host gave: a push with credentials is
// refused with 403 and nothing is sent. Once the host sets the remote's
// URL with /git/remotes, the push with credentials goes there.
func TestGitCredsUnbound(t *testing.T) {
	e := newCredEnv(t, nil)
	own := filepath.Join(e.work, "own")
	runGit(t, e.work, "clone", "-q", e.tr.bare, own)
	runGit(t, own, "config", "remote.origin.url", e.repoURL)
	write(t, filepath.Join(own, "new.txt"), "new\n")
	runGit(t, own, "add", ".")
	runGit(t, own, "commit", "-q", "-m", "new")
	before := len(*e.seen)
	er := e.expectError(http.StatusForbidden, codeForbidden, "POST", "/git/push", toolbox.GitPushRequest{Path: "own", Username: credUser, Password: credPassword})
	if !strings.Contains(er.Message, "/git/remotes") || hasSecret(er.Message) {
		t.Fatalf("answer to a push with credentials of an unbound remote: %q", er.Message)
	}
	if len(*e.seen) != before {
		t.Fatal("a refused push sent requests to the git server")
	}

	e.expect(http.StatusCreated, "POST", "/git/remotes", toolbox.GitAddRemoteRequest{Path: "own", Name: "origin", URL: e.repoURL, Overwrite: true})
	e.expect(http.StatusOK, "POST", "/git/push", toolbox.GitPushRequest{Path: "own", Username: credUser, Password: credPassword})
	if got, want := runGit(t, e.tr.bare, "rev-parse", "main"), runGit(t, own, "rev-parse", "HEAD"); got != want {
		t.Fatalf("the push after /git/remotes did not reach the git server: main %s, want %s", got, want)
	}
}

// TestGitStoredCredsExactOrigin: credentials stored with /git/credentials
// for a host without a port serve that protocol's default port only, not
// the same host on another port: a pull of a repository whose origin the
// sandbox pointed at a listener on 127.0.0.1 sends them nowhere (the
// control: the pull reached the listener).
func TestGitStoredCredsExactOrigin(t *testing.T) {
	e := newCredEnv(t, nil)
	c := newCapture(t)
	e.expect(http.StatusOK, "POST", "/git/credentials", toolbox.GitAuthenticateRequest{Username: credUser, Password: credPassword, Host: "127.0.0.1", Protocol: "http"})
	e.sandboxGit("config", "remote.origin.url", c.url+"/repo.git")
	e.do("POST", "/git/pull", toolbox.GitPullRequest{Path: "c"})
	if c.count() == 0 {
		t.Fatal("the pull did not reach the listener")
	}
	c.noSecrets(t)
}

// TestGitBoundAuth: boundAuth authenticates requests to its origin only,
// however the URL spells it; another port, scheme, host or a subdomain
// gets nothing.
func TestGitBoundAuth(t *testing.T) {
	a := newBoundAuth("https://Git.Example.com/r.git", credUser, credPassword).auth.(*boundAuth)
	for raw, want := range map[string]bool{
		"https://git.example.com/r.git/info/refs":      true,
		"https://GIT.example.com:443/x":                true,
		"https://git.example.com:0443/x":               true,
		"https://git.example.com:8443/x":               false,
		"http://git.example.com/x":                     false,
		"https://sub.git.example.com/x":                false,
		"https://example.com/x":                        false,
		"https://git.example.com.evil.test/x":          false,
		"https://evil.test/https://git.example.com/x":  false,
		"https://git.example.com@evil.test/r.git/info": false,
	} {
		r, err := http.NewRequest("GET", raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		a.SetAuth(r)
		if _, _, got := r.BasicAuth(); got != want {
			t.Errorf("%s: authenticated %v, want %v", raw, got, want)
		}
	}
	if s := a.String(); hasSecret(s) {
		t.Errorf("String() shows the secret: %s", s)
	}
}

// TestGitRedirectCredentials: a redirect to another origin loses the
// Authorization header and URL user information, even to the same host
// on https (go-git lets that one keep them) or on another port (net/http
// does); one within the origin keeps them.
func TestGitRedirectCredentials(t *testing.T) {
	first, _ := http.NewRequest("GET", "http://git.example.com/r.git/info/refs", nil)
	first.SetBasicAuth(credUser, credPassword)
	for raw, keep := range map[string]bool{
		"http://git.example.com:80/moved.git/info/refs": true,
		"https://git.example.com/r.git/info/refs":       false,
		"http://git.example.com:8080/r.git/info/refs":   false,
		"http://sub.git.example.com/r.git/info/refs":    false,
	} {
		req, _ := http.NewRequest("GET", raw, nil)
		req.Header = first.Header.Clone() // as net/http copies them
		if err := redirectCredentials(req, []*http.Request{first}); err != nil {
			t.Fatal(err)
		}
		if _, _, got := req.BasicAuth(); got != keep {
			t.Errorf("redirect to %s: credentials kept %v, want %v", raw, got, keep)
		}
	}
}
