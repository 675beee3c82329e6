package local

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// maxSocketPath is the longest unix socket path used as it is: an address
// holds about 107 bytes.
const maxSocketPath = 99

// newClient returns a toolbox client for the socket in the sandbox folder
// dir, and the transport it made. A socket path too long for a unix
// socket address is reached through a short path (shortPath) made per
// dial. Every request first resumes the sandbox if it is paused
// (resumingTransport).
func newClient(dir string) (*toolbox.Client, *http.Transport, error) {
	sock := filepath.Join(dir, socketFile)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout = 64, 32, 90*time.Second
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		if len(sock) <= maxSocketPath {
			return d.DialContext(ctx, "unix", sock)
		}
		p, release, err := shortPath(dir, socketFile)
		if err != nil {
			return nil, err
		}
		defer release()
		return d.DialContext(ctx, "unix", p)
	}
	hc := &http.Client{Transport: resumingTransport{dir: dir, base: tr}}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: "http://sandbox", HTTPClient: hc})
	return c, tr, err
}
