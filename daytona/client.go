package daytona

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
	"time"

	"github.com/agentbox-dev/agentbox/internal/redact"
)

// Client is a client of Daytona's control-plane API. It is safe for
// concurrent use.
type Client struct {
	cfg   Config
	base  string // the API URL without a trailing slash
	hc    *http.Client
	owned *http.Transport // the transport NewClient made, closed by Close
}

// NewClient returns a client configured by cfg, whose empty connection
// fields (APIKey/JWTToken, OrganizationID, APIURL, Target) are taken from
// the environment and a .env file in the working directory (see
// ConfigFromEnv). It fails when no credentials are found or the URL is
// not valid.
func NewClient(cfg Config) (*Client, error) {
	env, err := ConfigFromEnv("")
	if err != nil {
		return nil, err
	}
	cfg = cfg.merge(env)
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, base: strings.TrimSuffix(cfg.APIURL, "/"), hc: cfg.HTTPClient}
	if c.hc == nil {
		c.owned = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: cfg.RequestTimeout,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		}
		c.hc = &http.Client{Transport: c.owned}
	}
	return c, nil
}

// Close releases the client's idle connections.
func (c *Client) Close() error {
	if c.owned != nil {
		c.owned.CloseIdleConnections()
	}
	return nil
}

// APIURL returns the API's root URL.
func (c *Client) APIURL() string { return c.base }

// Target returns the configured target (region), "" for the server's.
func (c *Client) Target() string { return c.cfg.Target }

// Token returns the bearer token the client sends (an API key or JWT),
// for the toolbox proxy, which takes the same. Never log it.
func (c *Client) Token() string { return firstOf(c.cfg.APIKey, c.cfg.JWTToken) }

// HTTPClient returns the HTTP client the requests go through.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// call is one API call.
type call struct {
	method string
	path   string // under the API URL, escaped, e.g. "/sandbox/x/start"
	query  url.Values
	body   any // JSON-encoded when not nil
	// idempotent calls are retried after 5xx answers and transport
	// errors, not only after 429 and 503.
	idempotent bool
}

// escape escapes one path segment.
func escape(s string) string { return url.PathEscape(s) }

// do sends cl, retrying as the package documentation says, and decodes a
// JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, cl call, out any) error {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return fmt.Errorf("daytona: encoding the %s %s request: %w", cl.method, cl.path, err)
		}
	}
	for n := 0; ; n++ {
		err := c.once(ctx, cl, body, out)
		if err == nil || c.cfg.MaxRetries < 0 || n >= c.cfg.MaxRetries || !retryable(err, cl.idempotent) || ctx.Err() != nil {
			return err
		}
		if serr := sleep(ctx, backoff(n, c.cfg.RetryBaseDelay, c.cfg.RetryMaxDelay, err)); serr != nil {
			return err
		}
	}
}

// once sends cl one time.
func (c *Client) once(ctx context.Context, cl call, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	resp, err := c.send(ctx, cl.method, c.url(cl), body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("daytona: %s %s: reading the answer: %w", cl.method, cl.path, err)
	}
	if resp.StatusCode >= 400 {
		return parseAPIError(cl.method, cl.path, resp, data)
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 && resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &NotDaytonaError{URL: c.base + cl.path, Err: err}
	}
	return nil
}

// url returns the full URL of cl.
func (c *Client) url(cl call) string {
	u := c.base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	return u
}

// send sends one request to the absolute URL u with the client's headers
// and returns the answer, whatever its status. Transport errors say which
// URL could not be reached.
func (c *Client) send(ctx context.Context, method, u string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("daytona: %s %s: %w", method, redact.URL(u), err)
	}
	c.setHeaders(req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("daytona: %s %s: %w", method, redact.URL(u), context.Cause(ctx))
		}
		return nil, fmt.Errorf("daytona: cannot reach the Daytona API at %s (check DAYTONA_API_URL or Config.APIURL, and the network): %s %s: %w", c.base, method, redact.URL(u), unwrapURLError(err))
	}
	return resp, nil
}

// setHeaders sets the credentials and the SDK headers on h.
func (c *Client) setHeaders(h http.Header) {
	for k, vs := range c.cfg.Header {
		h[k] = append([]string(nil), vs...)
	}
	h.Set("Authorization", "Bearer "+c.Token())
	if c.cfg.APIKey == "" && c.cfg.OrganizationID != "" {
		h.Set("X-Daytona-Organization-ID", c.cfg.OrganizationID)
	}
	h.Set("X-Daytona-Source", Source)
	h.Set("X-Daytona-SDK-Version", SDKVersion)
	h.Set("User-Agent", Source+"/"+SDKVersion)
}

// unwrapURLError returns the cause of a *url.Error, whose message repeats
// the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
