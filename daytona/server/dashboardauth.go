package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The dashboard's sessions. A person logs in with an API key (POST
// /dashboard/login); the server keeps a session — a random id, the key's
// hash, organization and name, a CSRF token, an expiry — and sets the id
// in a cookie that is HttpOnly, SameSite=Strict, Path=/ and Secure over
// TLS. The cookie authenticates API and toolbox proxy requests as the key
// would (requestOrg), but only together with the session's CSRF token:
// the X-CSRF-Token header, or, on a WebSocket upgrade (whose headers a
// page cannot set), the csrf query parameter and an Origin of this
// server. A page of another site (or of a sandbox's preview, same-site
// but another origin) can make the browser send the cookie but cannot
// read the token. A session ends at its expiry, at logout, and as soon as
// its key is removed. The cookie and the token never reach a sandbox: the
// proxies drop them.

const (
	// dashboardCookie is the session cookie's name.
	dashboardCookie = "agentbox_dashboard"
	// csrfHeader carries the session's CSRF token on API requests.
	csrfHeader = "X-CSRF-Token"
	// csrfQuery carries it on WebSocket upgrades.
	csrfQuery = "csrf"
	// dashboardSessionTTL is how long a session lasts.
	dashboardSessionTTL = 12 * time.Hour
	// maxDashboardSessions bounds the sessions a server keeps.
	maxDashboardSessions = 4096
)

// dashSession is a dashboard session.
type dashSession struct {
	keyHash [sha256.Size]byte
	org     string
	keyName string
	csrf    string
	expires time.Time
}

// dashSessions are a server's dashboard sessions, by the SHA-256 hash of
// their id. Its methods are safe for concurrent use.
type dashSessions struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*dashSession
}

// randomToken returns 32 random bytes in hex.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// add starts a session of key, valid until now+TTL, and returns its id;
// ok is false when the server has too many.
func (d *dashSessions) add(key apiKey, now time.Time) (id string, sess dashSession, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[[sha256.Size]byte]*dashSession{}
	}
	for h, s := range d.m {
		if !now.Before(s.expires) {
			delete(d.m, h)
		}
	}
	if len(d.m) >= maxDashboardSessions {
		return "", dashSession{}, false
	}
	id = randomToken()
	sess = dashSession{keyHash: key.hash, org: key.org, keyName: key.name, csrf: randomToken(), expires: now.Add(dashboardSessionTTL)}
	d.m[sha256.Sum256([]byte(id))] = &sess
	return id, sess, true
}

// get returns the session of id, unless it has expired.
func (d *dashSessions) get(id string, now time.Time) (dashSession, bool) {
	if id == "" {
		return dashSession{}, false
	}
	h := sha256.Sum256([]byte(id))
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.m[h]
	if s == nil {
		return dashSession{}, false
	}
	if !now.Before(s.expires) {
		delete(d.m, h)
		return dashSession{}, false
	}
	return *s, true
}

// remove ends the session of id.
func (d *dashSessions) remove(id string) {
	d.mu.Lock()
	delete(d.m, sha256.Sum256([]byte(id)))
	d.mu.Unlock()
}

// dashboardSessionOf returns r's dashboard session (from its cookie),
// without looking at its CSRF token: valid, unexpired, of a key the
// server still has in the same organization.
func (s *Server) dashboardSessionOf(r *http.Request) (dashSession, bool) {
	c, err := r.Cookie(dashboardCookie)
	if err != nil {
		return dashSession{}, false
	}
	sess, ok := s.dash.get(c.Value, s.now())
	if !ok {
		return dashSession{}, false
	}
	if k, ok := s.keyOfHash(sess.keyHash); !ok || k.org != sess.org {
		s.dash.remove(c.Value) // the key was removed
		return dashSession{}, false
	}
	return sess, true
}

// dashboardOrg returns the organization of r's dashboard session when r
// also carries its CSRF token (header X-CSRF-Token; on a WebSocket
// upgrade, query parameter csrf and this server's Origin).
func (s *Server) dashboardOrg(r *http.Request) (string, bool) {
	sess, ok := s.dashboardSessionOf(r)
	if !ok {
		return "", false
	}
	token := r.Header.Get(csrfHeader)
	if isUpgrade(r) {
		if r.Header.Get("Origin") == "" || !sameOrigin(r) {
			return "", false
		}
		token = r.URL.Query().Get(csrfQuery)
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.csrf)) != 1 {
		return "", false
	}
	return sess.org, true
}

// dropDashboardCredentials removes the dashboard's cookie and CSRF token
// from h, a request to a sandbox, keeping its other cookies.
func dropDashboardCredentials(h http.Header) {
	h.Del(csrfHeader)
	cookies := h.Values("Cookie")
	if len(cookies) == 0 {
		return
	}
	h.Del("Cookie")
	var kept []string
	for _, line := range cookies {
		for part := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name != "" && name != dashboardCookie {
				kept = append(kept, strings.TrimSpace(part))
			}
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}
