package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// authorized reports whether r carries one of the server's API keys as a
// bearer token, or the server has none.
func (s *Server) authorized(r *http.Request) bool {
	if len(s.keys) == 0 {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.validToken(token)
}

// validToken reports whether token is one of the server's API keys, or the
// server has none. Its hash is compared with every key's, in constant
// time.
func (s *Server) validToken(token string) bool {
	if len(s.keys) == 0 {
		return true
	}
	if token == "" {
		return false
	}
	h := sha256.Sum256([]byte(token))
	match := 0
	for _, k := range s.keys {
		match |= subtle.ConstantTimeCompare(h[:], k[:])
	}
	return match == 1
}
