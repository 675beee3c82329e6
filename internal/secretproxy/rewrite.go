package secretproxy

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/hostname"
)

// subst replaces the placeholders of one request going to host (over
// TLS or not) and reports, once per secret, a placeholder that may not
// go there.
type subst struct {
	p        *Proxy
	t        *table
	host     string
	port     uint16
	tls      bool
	reported map[string]bool
}

// Rewrite replaces in req (URL, headers, a body up to MaxBody) the
// placeholders of the secrets that allow host (over tls or not), and
// reports an Event for each other placeholder it sees. For proxies that
// parse requests themselves (the egress proxy's absolute-URI forwarding).
//
// The URL's path and query get the value escaped as each needs; a header
// gets it as it is, and so does "Authorization: Basic" inside its base64
// user:password. The body is read whole when its length is at most
// MaxBody (chunked: up to MaxBody), then Content-Length is set to its new
// length; a longer body goes on unchanged. An error (reading the body)
// leaves req unusable.
func (p *Proxy) Rewrite(req *http.Request, host string, tls bool) error {
	name, err := hostname.Canonical(host)
	if err != nil {
		name = host // an IP or worse: no secret allows it; placeholders are reported
	}
	var port uint16
	if ps := req.URL.Port(); ps != "" {
		_, port, _ = splitHostPort("h:" + ps)
	}
	return p.rewrite(req, name, port, tls)
}

// rewrite is Rewrite for a request to name (canonical):port.
func (p *Proxy) rewrite(req *http.Request, name string, port uint16, tls bool) error {
	s := &subst{p: p, t: p.table.Load(), host: name, port: port, tls: tls}
	if len(s.t.secrets) == 0 {
		return nil
	}
	s.rewriteURL(req.URL)
	for k, vs := range req.Header {
		for i, v := range vs {
			vs[i] = s.replace(v, nil)
			if strings.EqualFold(k, "Authorization") {
				vs[i] = s.basic(vs[i])
			}
		}
	}
	return s.rewriteBody(req)
}

// rewriteURL replaces placeholders in u's path and query.
func (s *subst) rewriteURL(u *url.URL) {
	if ep := u.EscapedPath(); s.has(ep) {
		ep = s.replace(ep, url.PathEscape)
		if path, err := url.PathUnescape(ep); err == nil {
			u.Path, u.RawPath = path, ep
		}
	}
	if s.has(u.RawQuery) {
		u.RawQuery = s.replace(u.RawQuery, url.QueryEscape)
	}
	if s.has(u.Opaque) {
		u.Opaque = s.replace(u.Opaque, url.PathEscape)
	}
}

// basic replaces placeholders inside the credentials of a Basic
// authorization header value v.
func (s *subst) basic(v string) string {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return v
	}
	plain, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil || !s.has(string(plain)) {
		return v
	}
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(s.replace(string(plain), nil)))
}

// rewriteBody replaces placeholders in req's body when it is at most
// MaxBody long.
func (s *subst) rewriteBody(req *http.Request) error {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength > s.p.cfg.MaxBody || req.ContentLength == 0 {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, s.p.cfg.MaxBody+1))
	if err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	if int64(len(body)) > s.p.cfg.MaxBody {
		// Chunked and longer than MaxBody: it goes on as it came.
		s.scanOnly(body)
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		return nil
	}
	req.Body.Close()
	if s.has(string(body)) {
		body = []byte(s.replace(string(body), nil))
	}
	req.ContentLength = int64(len(body))
	req.TransferEncoding = nil
	req.Header.Del("Content-Length")
	req.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return nil
}

// has reports whether v may hold a placeholder.
func (s *subst) has(v string) bool {
	if s.t.prefixed {
		return strings.Contains(v, PlaceholderPrefix)
	}
	return v != ""
}

// replace returns v with the placeholders of the secrets allowed here
// replaced by their values (escaped by escape, if set), in one pass, and
// reports the others.
func (s *subst) replace(v string, escape func(string) string) string {
	if !s.has(v) {
		return v
	}
	var pairs []string
	for i := range s.t.secrets {
		sec := &s.t.secrets[i]
		if !strings.Contains(v, sec.Placeholder) {
			continue
		}
		if !sec.allows(s.host, s.tls) {
			s.report(sec)
			continue
		}
		val := sec.Value
		if escape != nil {
			val = escape(val)
		}
		pairs = append(pairs, sec.Placeholder, val)
	}
	if len(pairs) == 0 {
		return v
	}
	return strings.NewReplacer(pairs...).Replace(v)
}

// scanOnly reports the placeholders of a body too long to rewrite.
func (s *subst) scanOnly(body []byte) {
	for i := range s.t.secrets {
		sec := &s.t.secrets[i]
		if bytes.Contains(body, []byte(sec.Placeholder)) {
			if !sec.allows(s.host, s.tls) {
				s.report(sec)
			} else if !s.reported[sec.Name] {
				s.mark(sec.Name)
				s.p.event(Event{Protocol: s.protocol(), Host: s.host, Port: s.port, Secret: sec.Name, Reason: fmt.Sprintf("a placeholder in a request body longer than %d bytes is not replaced", s.p.cfg.MaxBody)})
			}
		}
	}
}

// report reports, once per request, a placeholder of sec that may not go
// to the request's host.
func (s *subst) report(sec *Secret) {
	if s.reported[sec.Name] {
		return
	}
	s.mark(sec.Name)
	reason := "the secret's placeholder was sent to a host the secret does not allow; it went unchanged"
	if !s.tls && sec.matches(s.host) {
		reason = "the secret's placeholder was sent in cleartext HTTP; the secret goes over TLS only; it went unchanged"
	}
	s.p.event(Event{Protocol: s.protocol(), Host: s.host, Port: s.port, Secret: sec.Name, Reason: reason})
}

func (s *subst) mark(name string) {
	if s.reported == nil {
		s.reported = map[string]bool{}
	}
	s.reported[name] = true
}

func (s *subst) protocol() string {
	if s.tls {
		return "https"
	}
	return "http"
}
