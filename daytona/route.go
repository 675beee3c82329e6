package daytona

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// routeHost is the host of the toolbox client's base URL: a placeholder
// that route replaces with the sandbox's toolbox proxy URL, which is known
// only once the sandbox is found or created (and may change).
const routeHost = "toolbox.daytona.invalid"

// route is the transport of the toolbox client: it sends each request
// for routeHost to the current sandbox's toolbox,
// {toolboxProxyUrl}/{sandboxId}/…, and fails with sandbox.ErrNotReady
// while there is none.
type route struct {
	next http.RoundTripper
	id   string // the logical id, for errors

	mu   sync.Mutex
	base *url.URL // nil: no sandbox attached
}

// set points the route at the toolbox of sandbox sb; nil detaches it.
func (r *route) set(sb *SandboxDTO) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb == nil {
		r.base = nil
		return nil
	}
	u, err := url.Parse(strings.TrimSuffix(sb.ToolboxProxyURL, "/") + "/" + url.PathEscape(sb.ID))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("daytona: sandbox %s has toolbox proxy URL %q, not an http(s) URL", sb.ID, sb.ToolboxProxyURL)
	}
	r.base = u
	return nil
}

func (r *route) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	base := r.base
	r.mu.Unlock()
	if req.URL.Host != routeHost {
		return r.next.RoundTrip(req)
	}
	if base == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &sandbox.NotReadyError{ID: r.id, Err: fmt.Errorf("no Daytona sandbox attached: start it first")}
	}
	out := req.Clone(req.Context())
	u := *base
	u.Path = base.Path + req.URL.Path
	if req.URL.RawPath != "" || base.RawPath != "" {
		u.RawPath = base.EscapedPath() + req.URL.EscapedPath()
	}
	u.RawQuery = req.URL.RawQuery
	out.URL = &u
	out.Host = ""
	return r.next.RoundTrip(out)
}
