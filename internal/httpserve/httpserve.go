// Package httpserve serves HTTP on a listener until a context ends, then
// shuts down gracefully: what agentbox serve and agentbox mcp share.
package httpserve

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Deadlines of every connection, before any handler sees it: a client
// must send a request's headers within headerTimeout (a slowloris that
// never ends them is closed), and a kept-alive connection is closed
// after idleTimeout without a request. Variables for tests.
var (
	headerTimeout = 30 * time.Second
	idleTimeout   = 2 * time.Minute
)

// Serve serves h on ln until ctx ends or serving fails. When ctx ends it
// stops accepting, waits up to grace for the requests in flight, closes
// the rest and returns nil.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-served
	return nil
}
