package daytona

import (
	"context"
	"encoding/json"
	"iter"
	"net/url"
	"strconv"
)

// GetConfig returns the deployment's configuration (GET /config).
func (c *Client) GetConfig(ctx context.Context) (*ServerConfig, error) {
	var out ServerConfig
	return &out, c.do(ctx, call{method: "GET", path: "/config", idempotent: true}, &out)
}

// CreateSandbox creates a sandbox (POST /sandbox) and returns it, usually
// in a transitional state; CreateAndWait waits for it to start. A create
// without Target gets the client's. It is not retried but after 429 and
// 503, which the server did not act on.
func (c *Client) CreateSandbox(ctx context.Context, req CreateSandbox) (*SandboxDTO, error) {
	if req.Target == "" {
		req.Target = c.cfg.Target
	}
	var out SandboxDTO
	return &out, c.do(ctx, call{method: "POST", path: "/sandbox", body: req}, &out)
}

// GetSandbox returns the sandbox with id or name idOrName; an unknown one
// is an *APIError matching ErrNotFound.
func (c *Client) GetSandbox(ctx context.Context, idOrName string) (*SandboxDTO, error) {
	var out SandboxDTO
	return &out, c.do(ctx, call{method: "GET", path: "/sandbox/" + escape(idOrName), idempotent: true}, &out)
}

// sandboxCall sends method to the route of sandbox idOrName under it (""
// for the sandbox itself) and decodes the Sandbox answered.
func (c *Client) sandboxCall(ctx context.Context, method, idOrName, sub string, query url.Values, idempotent bool) (*SandboxDTO, error) {
	var out SandboxDTO
	return &out, c.do(ctx, call{method: method, path: "/sandbox/" + escape(idOrName) + sub, query: query, idempotent: idempotent}, &out)
}

// StartSandbox starts a stopped or archived sandbox and returns it, usually
// starting (POST /sandbox/{id}/start); one already started is left so.
func (c *Client) StartSandbox(ctx context.Context, idOrName string) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/start", nil, true)
}

// StopSandbox stops a started sandbox and returns it, usually stopping;
// force kills its processes at once.
func (c *Client) StopSandbox(ctx context.Context, idOrName string, force bool) (*SandboxDTO, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return c.sandboxCall(ctx, "POST", idOrName, "/stop", q, false)
}

// ArchiveSandbox archives a stopped sandbox.
func (c *Client) ArchiveSandbox(ctx context.Context, idOrName string) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/archive", nil, false)
}

// DeleteSandbox deletes a sandbox and returns it, destroying.
func (c *Client) DeleteSandbox(ctx context.Context, idOrName string) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "DELETE", idOrName, "", nil, true)
}

// SetLabels replaces a sandbox's labels and returns them.
func (c *Client) SetLabels(ctx context.Context, idOrName string, labels map[string]string) (map[string]string, error) {
	var out struct {
		Labels map[string]string `json:"labels"`
	}
	body := struct {
		Labels map[string]string `json:"labels"`
	}{labels}
	err := c.do(ctx, call{method: "PUT", path: "/sandbox/" + escape(idOrName) + "/labels", body: body, idempotent: true}, &out)
	return out.Labels, err
}

// UpdateNetworkSettings changes a sandbox's network policy, live.
func (c *Client) UpdateNetworkSettings(ctx context.Context, idOrName string, ns NetworkSettings) (*SandboxDTO, error) {
	var out SandboxDTO
	return &out, c.do(ctx, call{method: "POST", path: "/sandbox/" + escape(idOrName) + "/network-settings", body: ns, idempotent: true}, &out)
}

// SetAutoStopInterval sets a sandbox's auto-stop interval in minutes (0:
// never).
func (c *Client) SetAutoStopInterval(ctx context.Context, idOrName string, minutes int) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/autostop/"+strconv.Itoa(minutes), nil, true)
}

// SetAutoArchiveInterval sets a sandbox's auto-archive interval in minutes
// (0: the deployment's longest).
func (c *Client) SetAutoArchiveInterval(ctx context.Context, idOrName string, minutes int) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/autoarchive/"+strconv.Itoa(minutes), nil, true)
}

// SetAutoDeleteInterval sets a sandbox's auto-delete interval in minutes
// (negative: never; 0: as soon as it stops).
func (c *Client) SetAutoDeleteInterval(ctx context.Context, idOrName string, minutes int) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/autodelete/"+strconv.Itoa(minutes), nil, true)
}

// SetPublic makes a sandbox's previews public (no token) or private.
func (c *Client) SetPublic(ctx context.Context, idOrName string, public bool) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/public/"+strconv.FormatBool(public), nil, true)
}

// ToolboxProxyURL returns the toolbox proxy URL of sandbox id (the
// toolbox of the sandbox is at it + "/" + id); the Sandbox's
// ToolboxProxyURL says the same when set.
func (c *Client) ToolboxProxyURL(ctx context.Context, id string) (string, error) {
	var out urlAnswer
	err := c.do(ctx, call{method: "GET", path: "/sandbox/" + escape(id) + "/toolbox-proxy-url", idempotent: true}, &out)
	return out.URL, err
}

// PreviewURL returns the preview URL of a sandbox's port.
func (c *Client) PreviewURL(ctx context.Context, idOrName string, port int) (*PreviewURL, error) {
	var out PreviewURL
	return &out, c.do(ctx, call{method: "GET", path: "/sandbox/" + escape(idOrName) + "/ports/" + strconv.Itoa(port) + "/preview-url", idempotent: true}, &out)
}

// SignedPreviewURL returns a preview URL of a sandbox's port that carries
// its token, valid expiresInSeconds (0: the server's default).
func (c *Client) SignedPreviewURL(ctx context.Context, idOrName string, port, expiresInSeconds int) (*SignedPreviewURL, error) {
	var q url.Values
	if expiresInSeconds > 0 {
		q = url.Values{"expiresInSeconds": {strconv.Itoa(expiresInSeconds)}}
	}
	var out SignedPreviewURL
	return &out, c.do(ctx, call{method: "GET", path: "/sandbox/" + escape(idOrName) + "/ports/" + strconv.Itoa(port) + "/signed-preview-url", query: q, idempotent: true}, &out)
}

// ListOptions filter a list of sandboxes.
type ListOptions struct {
	// Labels keeps the sandboxes that have all of them.
	Labels map[string]string
	// Name keeps those whose name starts with it.
	Name string
	// States keeps those in one of them.
	States []SandboxState
	// Limit is the page's size (1–200); 0: the server's default (100).
	Limit int
}

// SandboxPage is one page of a list; NextCursor is "" on the last.
type SandboxPage struct {
	Items      []SandboxDTO `json:"items"`
	NextCursor *string      `json:"nextCursor"`
}

// ListSandboxes returns the page of sandboxes that starts at cursor (""
// for the first).
func (c *Client) ListSandboxes(ctx context.Context, opts ListOptions, cursor string) (*SandboxPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Name != "" {
		q.Set("name", opts.Name)
	}
	if len(opts.Labels) > 0 {
		data, err := json.Marshal(opts.Labels)
		if err != nil {
			return nil, err
		}
		q.Set("labels", string(data))
	}
	for _, s := range opts.States {
		q.Add("states", string(s))
	}
	var out SandboxPage
	return &out, c.do(ctx, call{method: "GET", path: "/sandbox", query: q, idempotent: true}, &out)
}

// Sandboxes iterates over every sandbox opts keeps, page after page. It
// stops at the first error, which it yields.
func (c *Client) Sandboxes(ctx context.Context, opts ListOptions) iter.Seq2[*SandboxDTO, error] {
	return cursorPages(func(cursor string) ([]SandboxDTO, *string, error) {
		page, err := c.ListSandboxes(ctx, opts, cursor)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}
