package local

import (
	"context"
	"fmt"
	"net"
)

// DialToolbox connects to the toolbox server of the running sandbox, over
// its unix socket: a server in front of local sandboxes (such as agentbox
// serve's toolbox proxy) speaks HTTP over the connection. It fails with an error matching
// sandbox.ErrNotFound when there is no such sandbox, and with the dial's
// error when it does not run.
func (s *Sandbox) DialToolbox(ctx context.Context) (net.Conn, error) {
	stateDir, id := s.opts.StateDir, s.opts.ID
	if err := s.resumeBeforeUse(ctx); err != nil {
		return nil, fmt.Errorf("sandbox %q: %w", id, err)
	}
	p, release, err := shortPath(s.dir, socketFile)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: toolbox socket: %w", id, err)
	}
	defer release()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p)
	if err != nil {
		if _, lerr := lookup(ctx, stateDir, id); lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("sandbox %q: toolbox socket: %w", id, err)
	}
	return c, nil
}
