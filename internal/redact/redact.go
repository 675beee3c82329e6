// Package redact removes secrets from text meant for people and logs:
// errors, messages and URLs. Every redaction shows Marker in place of what
// it removed, so that a reader sees that something was there.
package redact

import (
	"bytes"
	"net/url"
	"strings"
)

// Marker replaces every secret removed.
const Marker = "REDACTED"

// Secrets returns s with every non-empty secret replaced by Marker.
func Secrets(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, Marker)
		}
	}
	return s
}

// SecretsBytes is Secrets for a byte slice; it returns b itself when no
// secret occurs in it.
func SecretsBytes(b []byte, secrets ...string) []byte {
	for _, sec := range secrets {
		if sec != "" && bytes.Contains(b, []byte(sec)) {
			b = bytes.ReplaceAll(b, []byte(sec), []byte(Marker))
		}
	}
	return b
}

// Text returns s with every non-empty secret replaced by Marker and the
// user information of every URL in it (scheme://user:password@host)
// replaced by Marker, the user name too: a token is often given as the
// user name. A URL ends at a '/', white space or a quote.
func Text(s string, secrets ...string) string {
	s = Secrets(s, secrets...)
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexFunc(s, func(r rune) bool {
			return r == '/' || r == ' ' || r == '\t' || r == '\n' || r == '"' || r == '\''
		})
		if end < 0 {
			end = len(s)
		}
		if at := strings.LastIndexByte(s[:end], '@'); at >= 0 {
			b.WriteString(Marker)
			s = s[at:]
		}
	}
}

// URL returns rawURL, all of it one URL, with its user information
// replaced by Marker, the user name too. A string url.Parse refuses is
// still redacted: everything between "://" and the authority's last '@'
// goes, white space included.
func URL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if u.User == nil {
			return rawURL
		}
		u.User = url.User(Marker)
		return u.String()
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	authority, path, slash := strings.Cut(rest, "/")
	i := strings.LastIndexByte(authority, '@')
	if i < 0 {
		return rawURL
	}
	out := scheme + "://" + Marker + "@" + authority[i+1:]
	if slash {
		out += "/" + path
	}
	return out
}
