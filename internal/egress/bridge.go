package egress

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/goroutine"
)

// Bridge accepts connections on ln (inside a sandbox: 127.0.0.1:3128, the
// address its proxy variables name) and joins each to a new connection
// to the proxy's unix socket at socket, at most maxConns at once (more
// wait to be accepted). A connection the proxy does not take is closed.
// Bridge returns when ln fails or is closed, with ln's error, after
// closing the connections it joined and waiting for their goroutines.
func Bridge(ln net.Listener, socket string, maxConns int) error {
	var (
		g     goroutine.Group
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		slots = make(chan struct{}, max(maxConns, 1))
	)
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		_ = g.Wait(context.Background())
	}()
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
	}
	var delay time.Duration
	for {
		slots <- struct{}{}
		c, err := ln.Accept()
		if err != nil {
			<-slots
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		track(c, true)
		g.Go(func() {
			defer func() { <-slots }()
			defer track(c, false)
			u, err := net.DialTimeout("unix", socket, 10*time.Second)
			if err != nil {
				c.Close()
				return
			}
			track(u, true)
			defer track(u, false)
			join(&g, c, u)
		})
	}
}
