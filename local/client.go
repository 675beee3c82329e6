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
// dir, and the transport it made (nil when it uses the client's own). A
// socket path too long for a unix socket address is reached through a
// short path (shortPath) made per dial.
func newClient(dir string) (*toolbox.Client, *http.Transport, error) {
	sock := filepath.Join(dir, socketFile)
	if len(sock) <= maxSocketPath {
		c, err := toolbox.NewClient(toolbox.ClientOptions{Socket: sock})
		return c, nil, err
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			p, release, err := shortPath(dir, socketFile)
			if err != nil {
				return nil, err
			}
			defer release()
			var d net.Dialer
			return d.DialContext(ctx, "unix", p)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: "http://sandbox", HTTPClient: &http.Client{Transport: tr}})
	return c, tr, err
}
