package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server/dashboard"
)

// The web dashboard (package dashboard) at /dashboard/, on the server's
// own address. Its login page and the files it needs are public; every
// other page needs a session (dashboardauth.go), a bearer key, or a server
// without keys (which answers loopback host names only, as its API).
// Every answer under /dashboard/ carries a strict Content-Security-Policy.

// dashboardCSP is the Content-Security-Policy of every dashboard answer:
// the page's own scripts, styles and API only.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// dashboardPublic are the files shown without a session: the login page.
var dashboardPublic = []string{"login.html", "login.js", "style.css"}

// dashboardKeys is what GET /dashboard/keys answers: the API keys of the
// caller's organization (never the keys themselves), read-only.
type dashboardKeys struct {
	Keys []APIKey `json:"keys"`
	// OperatorKeys counts the keys given to the server at its start
	// (Options.APIKeys, `agentbox serve --key`), of this organization.
	OperatorKeys int `json:"operatorKeys"`
}

// dashboardLogin is the body of POST /dashboard/login.
type dashboardLogin struct {
	Key string `json:"key"`
}

// dashboardRoutes adds the dashboard's routes to mux.
func (s *Server) dashboardRoutes(mux *http.ServeMux) {
	dash := func(pattern string, h handlerFunc) { mux.Handle(pattern, dashboardHeaders(s.handle(h, false))) }
	dash("GET /dashboard", func(w http.ResponseWriter, r *http.Request) error {
		http.Redirect(w, r, "/dashboard/", http.StatusMovedPermanently)
		return nil
	})
	dash("GET /dashboard/{path...}", s.serveDashboardFile)
	dash("POST /dashboard/login", s.dashboardLogin)
	dash("POST /dashboard/logout", s.dashboardLogout)
	dash("GET /dashboard/session", s.getDashboardSession)
	dash("GET /dashboard/keys", s.getDashboardKeys)
}

// dashboardHeaders sets the dashboard's security headers on every answer
// of next.
func dashboardHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// dashboardViewer reports whether r may see the dashboard's pages: a
// server without keys, a session, or a bearer key.
func (s *Server) dashboardViewer(r *http.Request) bool {
	if !s.AuthRequired() {
		return true
	}
	if _, ok := s.dashboardSessionOf(r); ok {
		return true
	}
	_, ok := s.requestOrg(r)
	return ok && r.Header.Get("Authorization") != ""
}

// serveDashboardFile answers a file of the dashboard; without a session,
// the login page only (the app's pages redirect to it).
func (s *Server) serveDashboardFile(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("path")
	if name == "" {
		name = "index.html"
	}
	if !slices.Contains(dashboardPublic, name) && !s.dashboardViewer(r) {
		if name == "index.html" {
			http.Redirect(w, r, "/dashboard/login.html", http.StatusSeeOther)
			return nil
		}
		return errorf(http.StatusUnauthorized, "Unauthorized: log in at /dashboard/login.html with an API key")
	}
	data, err := fs.ReadFile(dashboard.Files(), path.Clean(name))
	if err != nil {
		return errorf(http.StatusNotFound, "the dashboard has no page %s", name)
	}
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
	return nil
}

// dashboardLogin checks the API key of the JSON body {"key"} and starts a
// session of it: the cookie, and the session (with its CSRF token) as
// the answer.
func (s *Server) dashboardLogin(w http.ResponseWriter, r *http.Request) error {
	if !s.AuthRequired() {
		return errorf(http.StatusConflict, "this server has no API keys: the dashboard needs no login (it answers loopback names only): open /dashboard/")
	}
	var body dashboardLogin
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&body); err != nil {
		return errorf(http.StatusBadRequest, "the login body must be JSON {\"key\": \"API key\"}")
	}
	key, ok := s.keyOfHash(sha256.Sum256([]byte(strings.TrimSpace(body.Key))))
	if body.Key == "" || !ok {
		return errorf(http.StatusUnauthorized, "Unauthorized: that is not an API key of this server (agentbox serve keys ls lists them)")
	}
	id, sess, ok := s.dash.add(key, s.now())
	if !ok {
		return errorf(http.StatusServiceUnavailable, "too many dashboard sessions: try again later")
	}
	http.SetCookie(w, &http.Cookie{Name: dashboardCookie, Value: id, Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, Expires: sess.expires})
	writeJSON(w, sessionAnswer(sess))
	return nil
}

// sessionAnswer is the dashboardSession of sess.
func sessionAnswer(sess dashSession) dashboardSession {
	return dashboardSession{OrganizationID: sess.org, KeyName: sess.keyName, CSRFToken: sess.csrf, ExpiresAt: sess.expires.UTC()}
}

// dashboardLogout ends the request's session (which needs its CSRF token).
func (s *Server) dashboardLogout(w http.ResponseWriter, r *http.Request) error {
	if _, ok := s.dashboardOrg(r); !ok {
		return errorf(http.StatusUnauthorized, "Unauthorized: no dashboard session with its %s header", csrfHeader)
	}
	if c, err := r.Cookie(dashboardCookie); err == nil {
		s.dash.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: dashboardCookie, Value: "", Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, struct{}{})
	return nil
}

// getDashboardSession answers the request's session; on a server without
// keys, one without a token.
func (s *Server) getDashboardSession(w http.ResponseWriter, r *http.Request) error {
	if !s.AuthRequired() {
		writeJSON(w, dashboardSession{OrganizationID: s.org})
		return nil
	}
	sess, ok := s.dashboardSessionOf(r)
	if !ok {
		return errorf(http.StatusUnauthorized, "Unauthorized: no dashboard session: log in at /dashboard/login.html")
	}
	writeJSON(w, sessionAnswer(sess))
	return nil
}

// getDashboardKeys answers the API keys of the caller's organization.
func (s *Server) getDashboardKeys(w http.ResponseWriter, r *http.Request) error {
	org, ok := s.requestOrg(r)
	if !ok {
		return errorf(http.StatusUnauthorized, "Unauthorized: send a valid API key as Authorization: Bearer KEY, or the dashboard's session and %s", csrfHeader)
	}
	out := dashboardKeys{Keys: []APIKey{}}
	if org == s.org {
		out.OperatorKeys = len(s.keys)
	}
	kf, _, err := readKeysFile(s.stored.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if kf != nil {
		for _, k := range kf.sorted() {
			if k.OrganizationID == org {
				out.Keys = append(out.Keys, k.APIKey)
			}
		}
	}
	writeJSON(w, out)
	return nil
}
