package mcp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/httpserve"
)

// ErrTokenRequired is the error of serving HTTP beyond loopback without a
// bearer token.
var ErrTokenRequired = errors.New("mcp: serving HTTP beyond loopback needs a bearer token: anyone who reaches it could run commands in the sandbox")

// HTTPOptions configures the streamable HTTP handler.
type HTTPOptions struct {
	// Token, when set, is the bearer token every request must carry
	// ("Authorization: Bearer TOKEN"); others get 401.
	Token string
}

// Handler returns the streamable HTTP handler of the server.
func (s *Server) Handler(opts *HTTPOptions) http.Handler {
	var token string
	if opts != nil {
		token = opts.Token
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{Logger: s.opts.Logger})
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
			http.Error(w, "missing or wrong bearer token: send Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// shutdownTimeout bounds the wait for requests in flight when Serve ends.
const shutdownTimeout = 5 * time.Second

// Serve serves streamable HTTP on ln until ctx ends. Without a token it
// refuses (ErrTokenRequired) a listener not bound to a loopback address.
func (s *Server) Serve(ctx context.Context, ln net.Listener, opts *HTTPOptions) error {
	if (opts == nil || opts.Token == "") && !IsLoopback(ln.Addr().String()) {
		return fmt.Errorf("%w (listening on %s)", ErrTokenRequired, ln.Addr())
	}
	return httpserve.Serve(ctx, ln, s.Handler(opts), shutdownTimeout)
}

// IsLoopback reports whether addr (host:port) is on a loopback address or
// localhost.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
