package egress

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/goroutine"
)

// Defaults of [Config].
const (
	DefaultMaxConns         = 256
	DefaultHandshakeTimeout = 30 * time.Second
	DefaultDialTimeout      = 30 * time.Second
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultLogSize          = 100
)

// copyBufSize is the buffer of bytes copied in user space.
const copyBufSize = 64 << 10

// headBufSize bounds the head of a request or response (request line or
// status line and headers) and a TLS ClientHello record.
const headBufSize = 32 << 10

// ErrProxyClosed is returned by [Proxy.Serve] once the proxy is closed.
var ErrProxyClosed = errors.New("egress: proxy closed")

// Config configures a [Proxy]. The zero value refuses everything.
type Config struct {
	// Allow is the allow list; nil allows nothing. [Proxy.SetAllowList]
	// replaces it while the proxy runs.
	Allow *AllowList
	// Resolver resolves allowed names. Default: net.DefaultResolver.
	Resolver Resolver
	// AllowNonPublic lets allowed names reach addresses that are not
	// public unicast (loopback, private, link-local, this host's…).
	// Unsafe: for tests whose origin servers listen on loopback.
	AllowNonPublic bool
	// MaxConns bounds the connections served at once; more are closed at
	// once and logged. Default: DefaultMaxConns.
	MaxConns int
	// HandshakeTimeout bounds the time a client takes to say where it
	// goes (a request head, a SOCKS5 request). Default:
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// DialTimeout bounds connecting to a destination. Default:
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// IdleTimeout closes a connection through which no byte moved for
	// that long. Default: DefaultIdleTimeout. Enforced on Linux.
	IdleTimeout time.Duration
	// LogSize is how many refusals the policy log keeps. Default:
	// DefaultLogSize.
	LogSize int
	// OnRefusal, if set, is called with each refusal after it is logged,
	// on the goroutine that refused; it must not block.
	OnRefusal func(Refusal)
	// Intercept, if set, takes the CONNECTs to the hosts it Intercepts
	// (after policy admits them) instead of a tunnel, and rewrites
	// absolute-URI requests; [Proxy.SetIntercept] replaces it.
	Intercept Interceptor
}

// Proxy is the egress proxy. Create it with [New], serve listeners with
// [Proxy.Serve], end it with [Proxy.Close].
type Proxy struct {
	cfg   Config
	allow atomic.Pointer[AllowList]
	log   *policyLog
	host  hostAddrs
	slots chan struct{}
	ctx   context.Context // cancelled by Close
	stop  context.CancelFunc
	g     goroutine.Group

	bufs bufPool
	icpt interceptors

	mu       sync.Mutex
	closed   bool
	lns      map[net.Listener]struct{}
	sessions map[*session]struct{}
	sweeping bool
}

// New returns a proxy configured by cfg, with defaults for its zero
// fields.
func New(cfg Config) *Proxy {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.LogSize <= 0 {
		cfg.LogSize = DefaultLogSize
	}
	p := &Proxy{
		cfg:      cfg,
		log:      newPolicyLog(cfg.LogSize),
		slots:    make(chan struct{}, cfg.MaxConns),
		lns:      map[net.Listener]struct{}{},
		sessions: map[*session]struct{}{},
	}
	p.ctx, p.stop = context.WithCancel(context.Background())
	p.allow.Store(cfg.Allow)
	p.SetIntercept(cfg.Intercept)
	return p
}

// SetAllowList replaces the allow list, atomically: a connection is
// judged by one list or the other, never by a mix. Connections already
// made are not judged again.
func (p *Proxy) SetAllowList(l *AllowList) { p.allow.Store(l) }

// AllowList returns the allow list in force.
func (p *Proxy) AllowList() *AllowList { return p.allow.Load() }

// Refusals returns the policy log: the last refusals (at most
// Config.LogSize), oldest first, and how many there were in all.
func (p *Proxy) Refusals() ([]Refusal, uint64) { return p.log.list() }

// Serve accepts connections on ln and serves them until the proxy is
// closed (it then returns ErrProxyClosed) or ln fails. It closes ln.
func (p *Proxy) Serve(ln net.Listener) error {
	if !p.track(ln) {
		ln.Close()
		return ErrProxyClosed
	}
	defer p.untrack(ln)
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil {
				return ErrProxyClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		select {
		case p.slots <- struct{}{}:
		default:
			// Logged before the close, so that a client that sees the
			// close finds the reason in the log.
			p.refuse(Refusal{Protocol: "proxy", Reason: "too many connections at once (the limit is " + strconv.Itoa(p.cfg.MaxConns) + ")"})
			c.Close()
			continue
		}
		s := &session{client: c}
		if !p.addSession(s) {
			<-p.slots
			c.Close()
			return ErrProxyClosed
		}
		p.g.Go(func() {
			defer p.endSession(s)
			defer func() { <-p.slots }() // before the client sees the end
			p.serveConn(s)
		})
	}
}

// Close stops every Serve, closes every connection and waits until their
// goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.stop()
	for ln := range p.lns {
		ln.Close()
	}
	for s := range p.sessions {
		s.close()
	}
	p.mu.Unlock()
	return p.g.Wait(context.Background())
}

func (p *Proxy) track(ln net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.lns[ln] = struct{}{}
	return true
}

func (p *Proxy) untrack(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.lns, ln)
	ln.Close()
}

// refuse logs r. Callers log a refusal before the client can see it (the
// answer, or the close), so that a client that saw one finds it in the
// log.
func (p *Proxy) refuse(r Refusal) {
	r.Time = time.Now().UTC()
	r.Host = printable(r.Host)
	p.log.add(r)
	if p.cfg.OnRefusal != nil {
		p.cfg.OnRefusal(r)
	}
}

// serveConn serves one client connection: SOCKS5 when its first byte is
// 5, HTTP otherwise.
func (p *Proxy) serveConn(s *session) {
	c := s.client
	_ = c.SetDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	br := bufio.NewReaderSize(c, headBufSize)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	switch first[0] {
	case socks5Version:
		p.serveSOCKS5(s, br)
	case 4:
		p.refuse(Refusal{Protocol: "proxy", Reason: "SOCKS4 is not supported: use SOCKS5 with names (socks5h://)"})
	default:
		p.serveHTTP(s, br)
	}
}

// session is one client connection and the upstream connection it uses,
// watched for idleness.
type session struct {
	client net.Conn

	mu       sync.Mutex
	upstream net.Conn
	closed   bool
	moved    uint64    // the upstream's byte counter at the last sweep
	active   time.Time // when moved last changed
}

// setUpstream makes up the session's upstream connection, or closes it if
// the session is closed.
func (s *session) setUpstream(up net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		up.Close()
		return false
	}
	s.upstream, s.moved, s.active = up, 0, time.Now()
	return true
}

// close closes both connections of s.
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.client.Close()
	if s.upstream != nil {
		s.upstream.Close()
	}
}

// idle reports whether no byte moved through the upstream of s for d, as
// of now.
func (s *session) idle(now time.Time, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.upstream == nil {
		return false // the handshake deadline applies
	}
	n, ok := movedBytes(s.upstream)
	if !ok || n != s.moved {
		s.moved, s.active = n, now
		return false
	}
	return now.Sub(s.active) >= d
}

func (p *Proxy) addSession(s *session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.sessions[s] = struct{}{}
	if !p.sweeping {
		p.sweeping = true
		p.g.Go(p.sweep)
	}
	return true
}

// active returns the number of connections being served.
func (p *Proxy) active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

func (p *Proxy) endSession(s *session) {
	s.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sessions, s)
}

// sweep closes idle sessions until the proxy closes; it ends when no
// session is left (addSession starts it again).
func (p *Proxy) sweep() {
	t := time.NewTicker(max(p.cfg.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case now := <-t.C:
			p.mu.Lock()
			if len(p.sessions) == 0 {
				p.sweeping = false
				p.mu.Unlock()
				return
			}
			var idle []*session
			for s := range p.sessions {
				if s.idle(now, p.cfg.IdleTimeout) {
					idle = append(idle, s)
				}
			}
			p.mu.Unlock()
			for _, s := range idle {
				s.close()
			}
		}
	}
}
