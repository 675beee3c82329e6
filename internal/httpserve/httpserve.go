// Package httpserve serves HTTP on a listener until a context ends, then
// shuts down gracefully: what agentbox serve and agentbox mcp share.
package httpserve

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Serve serves h on ln until ctx ends or serving fails. When ctx ends it
// stops accepting, waits up to grace for the requests in flight, closes
// the rest and returns nil.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
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
