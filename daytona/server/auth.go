package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Authentication and tenants: every API key belongs to an organization,
// and a request sees the sandboxes and volumes of its key's organization
// only — another organization's are not found (404). The keys are those
// of Options.APIKeys (of Options.OrganizationID) and those of the store
// (keys.go), of their own organizations, which may change while the
// server runs; only their SHA-256 hashes are kept. Without any key every request is accepted, as of
// Options.OrganizationID.

// apiKey is a key the server accepts: its hash and organization.
type apiKey struct {
	hash [sha256.Size]byte
	org  string
	name string // the records' name; "" for Options.APIKeys
}

// orgKey is the context key of a request's organization.
type orgKey struct{}

// withOrg returns r with org as its organization.
func withOrg(r *http.Request, org string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), orgKey{}, org))
}

// orgOf returns the organization of r, which handle has authenticated.
func orgOf(r *http.Request) string {
	org, _ := r.Context().Value(orgKey{}).(string)
	return org
}

// requestOrg returns the organization of the API key r carries as a
// bearer token, or else of its dashboard session (its cookie and CSRF
// token: dashboardauth.go); ok is false when it carries none of the
// server's keys. Without keys, every request is of the server's default
// organization.
func (s *Server) requestOrg(r *http.Request) (org string, ok bool) {
	if !s.AuthRequired() {
		return s.org, true
	}
	if r.Header.Get("Authorization") == "" {
		return s.dashboardOrg(r)
	}
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return s.tokenOrg(token)
}

// tokenOrg returns the organization of API key token; ok is false when
// token is none of the server's keys. Its hash is compared with every
// key's, in constant time. Without keys, every token is of the server's
// default organization.
func (s *Server) tokenOrg(token string) (org string, ok bool) {
	if !s.AuthRequired() {
		return s.org, true
	}
	if token == "" {
		return "", false
	}
	k, ok := s.keyOfHash(sha256.Sum256([]byte(token)))
	return k.org, ok
}

// keyOfHash returns the server's key whose hash is h, comparing it with
// every key's in constant time.
func (s *Server) keyOfHash(h [sha256.Size]byte) (key apiKey, ok bool) {
	for _, keys := range [][]apiKey{s.keys, s.stored.current()} {
		for _, k := range keys {
			if subtle.ConstantTimeCompare(h[:], k.hash[:]) == 1 {
				key, ok = k, true
			}
		}
	}
	return key, ok
}

// AuthRequired reports whether the server has API keys, which every
// request but /api/config must carry. Without, it accepts every request:
// listen on loopback only then. A server that had keys when it started
// requires one for good: with every key removed it refuses every request.
// One that had none requires one as soon as a key is created.
func (s *Server) AuthRequired() bool {
	return s.keyed || len(s.keys) > 0 || len(s.stored.current()) > 0
}
