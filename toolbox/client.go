// Package toolbox speaks the Daytona toolbox API, the HTTP protocol of the
// daemon that runs inside every sandbox: one-shot execution, sessions with
// their commands and logs, and files.
//
// [Client] talks to Daytona's own daemon (through its cloud proxy) and to
// agentbox's toolbox server (package toolbox/daemon) over TCP or a unix
// socket. Where an agentbox server offers a protocol extension (binary-safe
// log frames with the exit code, exact binary stdin with close, base64
// output) the client uses it, and stateless session commands on request
// (SessionExecuteWith); against a plain Daytona server it uses Daytona's
// protocol.
package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/redact"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// ClientOptions configures a [Client]. Either BaseURL or Socket must be set.
type ClientOptions struct {
	// BaseURL is the toolbox root, e.g. "http://127.0.0.1:2280" or
	// "https://proxy.app.daytona.io/toolbox/<sandboxId>". With Socket set it
	// may be empty ("http://sandbox" is used). It must not carry a query or
	// credentials: pass the token in Token.
	BaseURL string
	// Socket is a unix socket path; when set every request goes over it.
	Socket string
	// Token is the bearer token sent as "Authorization: Bearer …". It never
	// appears in errors or logs.
	Token string
	// HTTPClient is an optional base client. Its Transport is wrapped, not
	// replaced, unless Socket is set (then a unix-socket transport is used
	// and the client's other settings are kept).
	HTTPClient *http.Client
	// Source is sent as X-Daytona-Source; default SourceName.
	Source string
	// SDKVersion is sent as X-Daytona-SDK-Version; default SDKVersion. It
	// must be 0.167.0 or newer for JSON logs with markers.
	SDKVersion string
	// DisableWebSocket makes FollowLogs poll instead of following over a
	// WebSocket.
	DisableWebSocket bool
	// PollInterval is the polling fallback's interval; default 50ms.
	PollInterval time.Duration
}

// DefaultPollInterval is the polling interval used when
// ClientOptions.PollInterval is zero.
const DefaultPollInterval = 50 * time.Millisecond

// Client is a toolbox API client. It is safe for concurrent use; it keeps
// connections alive between requests, so a call usually costs one round
// trip on an open connection.
type Client struct {
	base   string // scheme://host/prefix without trailing slash
	hc     *http.Client
	owned  *http.Transport // transport created by NewClient, closed by Close
	token  string
	noWS   bool
	poll   time.Duration
	closed chan struct{}

	mu       sync.Mutex
	ext      Extensions
	extKnown bool
}

// NewClient returns a client for the toolbox at opts.BaseURL or opts.Socket.
func NewClient(opts ClientOptions) (*Client, error) {
	base := opts.BaseURL
	if base == "" {
		if opts.Socket == "" {
			return nil, fmt.Errorf("toolbox: ClientOptions needs BaseURL (e.g. \"http://127.0.0.1:2280\") or Socket: %w", sandbox.ErrInvalidArgument)
		}
		base = "http://sandbox"
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("toolbox: invalid BaseURL: %w", sandbox.ErrInvalidArgument)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("toolbox: BaseURL scheme must be http or https, not %q: %w", u.Scheme, sandbox.ErrInvalidArgument)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("toolbox: BaseURL %q has no host: %w", redact.URL(base), sandbox.ErrInvalidArgument)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("toolbox: BaseURL must not contain credentials, a query or a fragment; pass the token in ClientOptions.Token: %w", sandbox.ErrInvalidArgument)
	}
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("toolbox: PollInterval must not be negative: %w", sandbox.ErrInvalidArgument)
	}
	if strings.ContainsAny(opts.Token, "\r\n") {
		return nil, fmt.Errorf("toolbox: Token contains a line break: %w", sandbox.ErrInvalidArgument)
	}
	c := &Client{
		base:   strings.TrimRight(u.String(), "/"),
		token:  opts.Token,
		noWS:   opts.DisableWebSocket,
		poll:   opts.PollInterval,
		closed: make(chan struct{}),
	}
	if c.poll == 0 {
		c.poll = DefaultPollInterval
	}
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	}
	var rt http.RoundTripper
	switch {
	case opts.Socket != "":
		c.owned = newTransport()
		socket := opts.Socket
		c.owned.Proxy = nil
		c.owned.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}
		rt = c.owned
	case hc.Transport != nil:
		rt = hc.Transport
	default:
		c.owned = newTransport()
		rt = c.owned
	}
	source, version := opts.Source, opts.SDKVersion
	if source == "" {
		source = SourceName
	}
	if version == "" {
		version = SDKVersion
	}
	hc.Transport = &headerTransport{next: rt, token: opts.Token, host: u.Host, source: source, version: version, c: c}
	c.hc = &hc
	return c, nil
}

// newTransport returns a transport tuned for many short requests to one
// host: enough idle connections that concurrent commands reuse them.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 64
	t.MaxIdleConnsPerHost = 32
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// Close releases idle connections. Requests in flight are not interrupted;
// the client must not be used afterwards.
func (c *Client) Close() error {
	select {
	case <-c.closed:
		return nil
	default:
		close(c.closed)
	}
	c.hc.CloseIdleConnections()
	return nil
}

// headerTransport adds the authentication and SDK headers to every request
// (the WebSocket handshake included) and records the server's extensions.
type headerTransport struct {
	next            http.RoundTripper
	token           string
	host            string
	source, version string
	c               *Client
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if t.token != "" && strings.EqualFold(r.URL.Host, t.host) {
		// Only to our own host: a redirect elsewhere never gets the token.
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	if r.Header.Get(HeaderSDKVersion) == "" {
		r.Header.Set(HeaderSDKVersion, t.version) // a request may announce another (follower.fetchRest)
	}
	r.Header.Set(HeaderSource, t.source)
	if r.Header.Get("User-Agent") == "" {
		r.Header.Set("User-Agent", t.source+"/"+t.version)
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.c.noteExtensions(resp)
	return resp, nil
}

func (t *headerTransport) CloseIdleConnections() {
	if ci, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// Extensions lists the agentbox protocol extensions a server offers. A plain
// Daytona server offers none.
type Extensions struct {
	// Frames: WebSocket log follow with stream-id frames and the exit code
	// in the close reason.
	Frames bool
	// Stdin: exact input bytes and closing a command's stdin.
	Stdin bool
	// Base64: binary-safe stdout and stderr in exec and log answers.
	Base64 bool
	// Stateless: session commands that leave the session's state alone
	// (SessionExecOptions.Stateless).
	Stateless bool
	// Binary: sync exec answers with the raw output.
	Binary bool
	// Tether: commands that die with their client
	// (SessionExecOptions.Tether).
	Tether bool
	// PtyCommand: PTY sessions that run a command line
	// (PtyCreateRequest.Command).
	PtyCommand bool
}

func parseExtensions(v string) Extensions {
	var e Extensions
	for _, name := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case ExtFrames:
			e.Frames = true
		case ExtStdin:
			e.Stdin = true
		case ExtBase64:
			e.Base64 = true
		case ExtStateless:
			e.Stateless = true
		case ExtBinary:
			e.Binary = true
		case ExtTether:
			e.Tether = true
		case ExtPtyCommand:
			e.PtyCommand = true
		}
	}
	return e
}

// useExtensions is the request header asking for the extensions exts
// (comma separated).
func useExtensions(exts string) http.Header {
	return http.Header{http.CanonicalHeaderKey(HeaderUseExtensions): {exts}}
}

// base64Encoded reports whether an answer's header confirms that its
// stdout and stderr are base64 (the base64 extension).
func base64Encoded(h http.Header) bool {
	return strings.EqualFold(strings.TrimSpace(h.Get(HeaderEncoding)), EncodingBase64)
}

func (c *Client) noteExtensions(resp *http.Response) {
	vals, ok := resp.Header[http.CanonicalHeaderKey(HeaderExtensions)]
	if !ok && (resp.StatusCode >= 400 || resp.StatusCode < 200) {
		// An error from a proxy in front of the server says nothing
		// about the server itself.
		return
	}
	e := parseExtensions(strings.Join(vals, ","))
	c.mu.Lock()
	c.ext, c.extKnown = e, true
	c.mu.Unlock()
}

func (c *Client) cachedExtensions() (Extensions, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ext, c.extKnown
}

// Extensions reports the agentbox protocol extensions the server offers, as
// learned from the X-Agentbox-Extensions header of the latest response. If
// no response was seen yet it asks GET /version. The answer is cached.
func (c *Client) Extensions(ctx context.Context) (Extensions, error) {
	if e, ok := c.cachedExtensions(); ok {
		return e, nil
	}
	if _, err := c.Version(ctx); err != nil {
		return Extensions{}, err
	}
	e, _ := c.cachedExtensions()
	return e, nil
}

// Version returns the server's version (GET /version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var v VersionResponse
	if err := c.doJSON(ctx, http.MethodGet, "/version", nil, nil, nil, &v); err != nil {
		return "", err
	}
	return v.Version, nil
}

// WorkDir returns the server's working directory, the default cwd of
// commands (GET /work-dir).
func (c *Client) WorkDir(ctx context.Context) (string, error) {
	var d DirResponse
	if err := c.doJSON(ctx, http.MethodGet, "/work-dir", nil, nil, nil, &d); err != nil {
		return "", err
	}
	return d.Dir, nil
}

// UserHomeDir returns the sandbox user's home directory (GET /user-home-dir).
func (c *Client) UserHomeDir(ctx context.Context) (string, error) {
	var d DirResponse
	if err := c.doJSON(ctx, http.MethodGet, "/user-home-dir", nil, nil, nil, &d); err != nil {
		return "", err
	}
	return d.Dir, nil
}

// Execute runs a one-shot command (POST /process/execute). The command is a
// shell script; stdout and stderr come back merged in Result. A server-side
// timeout gives an *APIError with StatusCode 408.
func (c *Client) Execute(ctx context.Context, req ExecuteRequest) (*ExecuteResponse, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, fmt.Errorf("toolbox: execute: command is empty: %w", sandbox.ErrInvalidArgument)
	}
	if req.Timeout < 0 {
		return nil, fmt.Errorf("toolbox: execute: timeout must not be negative: %w", sandbox.ErrInvalidArgument)
	}
	var r ExecuteResponse
	if err := c.doJSON(ctx, http.MethodPost, "/process/execute", nil, req, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// request builds a request for path (already escaped) and query.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("toolbox: %s %s: %w", method, path, err)
	}
	return req, nil
}

// send performs req and returns the response if its status is 2xx. Any other
// status is turned into an *APIError and the body is closed.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	select {
	case <-c.closed:
		return nil, fmt.Errorf("toolbox: %s %s: client is closed", req.Method, req.URL.Path)
	default:
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("toolbox: %s %s: %w", req.Method, req.URL.Path, ctxErr)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in our own prefix already
		}
		return nil, fmt.Errorf("toolbox: %s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, c.newAPIError(req, resp)
	}
	return resp, nil
}

// doJSON sends in (when not nil) as JSON and decodes a 2xx answer into out
// (when not nil). hdr adds request headers.
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in any, hdr http.Header, out any) error {
	_, err := c.doJSONResp(ctx, method, path, query, in, hdr, out)
	return err
}

// doJSONResp is doJSON that also returns the response (its body closed).
func (c *Client) doJSONResp(ctx context.Context, method, path string, query url.Values, in any, hdr http.Header, out any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("toolbox: %s %s: encoding request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if out != nil {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	if out != nil {
		if err := decodeJSON(resp, answerLimit(path), out); err != nil {
			return nil, fmt.Errorf("toolbox: %s %s: decoding %d answer: %w", method, path, resp.StatusCode, err)
		}
	}
	return resp, nil
}

// answerLimit is the size limit of the JSON answer of path: MaxOutputBytes
// for the routes whose answer carries a command's output, else
// MaxJSONBytes.
func answerLimit(path string) int64 {
	switch path {
	case "/process/execute", "/process/code-run":
		return maxOutputBytes
	}
	return maxJSONBytes
}

// decodeJSON decodes resp's body, of at most limit bytes, leniently:
// unknown fields are ignored, an empty body leaves out untouched.
func decodeJSON(resp *http.Response, limit int64, out any) error {
	b, err := readAnswer(resp, limit, "the answer")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return json.Unmarshal(b, out)
}

// closeBody drains a little of what is left so the connection can be
// reused, then closes.
func closeBody(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	_ = b.Close()
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

func checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("toolbox: %s is empty: %w", what, sandbox.ErrInvalidArgument)
	}
	return nil
}
