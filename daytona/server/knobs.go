package server

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Test knobs: what a test of a Daytona client sets to see how the client
// copes with a slow or failing control plane. They are off by default:
// a Server without Options.Knobs has none of them, and one with Knobs
// honours the request headers below only when Knobs.Headers is set.
//
// Request headers (with Knobs.Headers):
//
//	X-Agentbox-Test-Latency: 20ms        delay this request (a Go duration)
//	X-Agentbox-Test-Fault: KIND[;times=N][;key=K][;retry-after=S]
//	X-Agentbox-Test-Toolbox: daytona     (on POST /api/sandbox) the sandbox's
//	                                     toolbox runs in its Daytona-behaviour mode
//
// KIND is one of the FaultKind values ("500" … "599", "429", "reset",
// "websocket-drop", "stop", "delete"). A fault header hits the first N
// requests carrying the same header value (every one without times=):
// a retrying client sends the same header again, so times=2 fails two
// tries and lets the third through. Give each test its own key= so that
// the counts of two tests never mix.

// Header names of the test knobs.
const (
	HeaderTestLatency = "X-Agentbox-Test-Latency"
	HeaderTestFault   = "X-Agentbox-Test-Fault"
	HeaderTestToolbox = "X-Agentbox-Test-Toolbox"
)

// Knobs are the test knobs of a Server (Options.Knobs). The zero value
// turns nothing on.
type Knobs struct {
	// Latency delays every request by this much before it is handled.
	Latency time.Duration
	// Faults are injected into the requests they match, in order: the
	// first that matches a request (and has hits left) acts on it. More
	// can be added with Server.InjectFault.
	Faults []Fault
	// DaytonaToolbox runs the toolbox of every sandbox created from now
	// on in its Daytona-behaviour mode (package toolbox/daemon,
	// Options.Daytona), as header X-Agentbox-Test-Toolbox: daytona does
	// for one create.
	DaytonaToolbox bool
	// Headers honours the X-Agentbox-Test-* request headers.
	Headers bool
	// CountRequests counts the requests of every sandbox, by route
	// (Server.RequestCounts).
	CountRequests bool
	// MetricsInterval is how often the metrics of each started sandbox
	// are sampled for the dashboard's history (metrics.go); 0: every 10 s.
	MetricsInterval time.Duration
}

// FaultKind says what a Fault does.
type FaultKind string

// Kinds of fault. A status (FaultKind("503"), FaultTooManyRequests)
// answers with that status and Daytona's error body.
const (
	// FaultTooManyRequests answers 429 with a Retry-After header.
	FaultTooManyRequests FaultKind = "429"
	// FaultReset resets the connection (TCP RST) without answering.
	FaultReset FaultKind = "reset"
	// FaultWebSocketDrop lets a WebSocket upgrade through and closes the
	// connection after its first message from the server: a stream
	// dropped in its middle. Requests that are no upgrade pass.
	FaultWebSocketDrop FaultKind = "websocket-drop"
	// FaultStop stops the request's sandbox behind the client's back,
	// as its auto-stop timer would, before the request is handled.
	FaultStop FaultKind = "stop"
	// FaultDelete deletes the request's sandbox behind the client's back
	// before the request is handled.
	FaultDelete FaultKind = "delete"
)

// Fault is one injected fault.
type Fault struct {
	// Kind is what the fault does.
	Kind FaultKind
	// Method and Path restrict the fault to requests with that method
	// and a URL path holding Path ("" matches any).
	Method, Path string
	// Times is how many requests the fault hits; 0: every one.
	Times int
	// RetryAfter is the Retry-After of a 429, rounded up to whole
	// seconds. Default: 1 s.
	RetryAfter time.Duration
}

// status returns the HTTP status the fault answers with, or 0.
func (f Fault) status() int {
	n, err := strconv.Atoi(string(f.Kind))
	if err != nil || (n != http.StatusTooManyRequests && (n < 500 || n > 599)) {
		return 0
	}
	return n
}

// check reports what is wrong with f.
func (f Fault) check() error {
	switch f.Kind {
	case FaultReset, FaultWebSocketDrop, FaultStop, FaultDelete:
	default:
		if f.status() == 0 {
			return fmt.Errorf("unknown fault kind %q: want 429, 500…599, reset, websocket-drop, stop or delete", f.Kind)
		}
	}
	if f.Times < 0 || f.RetryAfter < 0 {
		return fmt.Errorf("fault %s: negative times or retry-after", f.Kind)
	}
	return nil
}

// matches reports whether f applies to r.
func (f Fault) matches(r *http.Request) bool {
	if f.Kind == FaultWebSocketDrop && !isUpgrade(r) {
		return false
	}
	return (f.Method == "" || f.Method == r.Method) && strings.Contains(r.URL.Path, f.Path)
}

// parseFault parses the value of header X-Agentbox-Test-Fault.
func parseFault(v string) (Fault, error) {
	parts := strings.Split(v, ";")
	f := Fault{Kind: FaultKind(strings.TrimSpace(parts[0]))}
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch k {
		case "times":
			n, err := strconv.Atoi(val)
			if err != nil {
				return Fault{}, fmt.Errorf("times=%q is not a number", val)
			}
			f.Times = n
		case "retry-after":
			n, err := strconv.Atoi(val)
			if err != nil {
				return Fault{}, fmt.Errorf("retry-after=%q is not a number of seconds", val)
			}
			f.RetryAfter = time.Duration(n) * time.Second
		case "key":
		default:
			return Fault{}, fmt.Errorf("unknown parameter %q", k)
		}
	}
	return f, f.check()
}

// knobs is the state of a Server's test knobs.
type knobs struct {
	Knobs
	mu     sync.Mutex
	faults []*armedFault         // Knobs.Faults and InjectFault's
	byHdr  map[string]int        // hits of each fault header value so far
	counts map[string]RouteCount // by sandbox id
}

// armedFault is a Fault with its hits so far.
type armedFault struct {
	Fault
	hits int
}

// RouteCount counts the requests of one sandbox, by route: "METHOD
// /path" with the sandbox's id or name in the path written {id}.
type RouteCount map[string]int

// Total returns the number of requests of every route.
func (c RouteCount) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// newKnobs returns the state of k, or nil when k is nil.
func newKnobs(k *Knobs) (*knobs, error) {
	if k == nil {
		return nil, nil
	}
	kn := &knobs{Knobs: *k, byHdr: map[string]int{}, counts: map[string]RouteCount{}}
	for _, f := range k.Faults {
		if err := f.check(); err != nil {
			return nil, fmt.Errorf("agentbox serve: %w", err)
		}
		kn.faults = append(kn.faults, &armedFault{Fault: f})
	}
	return kn, nil
}

// InjectFault adds f to the server's faults (Knobs.Faults). It fails
// when the server has no Knobs or f is not valid.
func (s *Server) InjectFault(f Fault) error {
	if s.knobs == nil {
		return fmt.Errorf("agentbox serve: no test knobs (Options.Knobs)")
	}
	if err := f.check(); err != nil {
		return fmt.Errorf("agentbox serve: %w", err)
	}
	s.knobs.mu.Lock()
	s.knobs.faults = append(s.knobs.faults, &armedFault{Fault: f})
	s.knobs.mu.Unlock()
	return nil
}

// RequestCounts returns the requests made so far for the sandbox with id
// sandboxID, by route (Knobs.CountRequests); "" counts those that name
// no sandbox (create, list, /config). Nil without counting.
func (s *Server) RequestCounts(sandboxID string) RouteCount {
	if s.knobs == nil {
		return nil
	}
	s.knobs.mu.Lock()
	defer s.knobs.mu.Unlock()
	return maps.Clone(s.knobs.counts[sandboxID])
}

// ResetRequestCounts forgets every count of RequestCounts.
func (s *Server) ResetRequestCounts() {
	if s.knobs == nil {
		return
	}
	s.knobs.mu.Lock()
	clear(s.knobs.counts)
	s.knobs.mu.Unlock()
}

// daytonaToolbox reports whether a sandbox created by r gets a toolbox in
// its Daytona-behaviour mode.
func (s *Server) daytonaToolbox(r *http.Request) bool {
	k := s.knobs
	return k != nil && (k.DaytonaToolbox || k.Headers && strings.EqualFold(r.Header.Get(HeaderTestToolbox), "daytona"))
}

// applyKnobs runs the test knobs on r before it is handled: it counts it,
// delays it, and injects the fault that matches it. It returns the
// writer to handle r with, and false when the fault answered r already.
//
// They run after authentication: org is the organization of r's key. The
// X-Agentbox-Test-* headers are the operator's: a request of another
// organization (a tenant's key) carrying one is refused with 403, and a
// sandbox named in r's path is looked up in org only.
func (s *Server) applyKnobs(w http.ResponseWriter, r *http.Request, org string) (http.ResponseWriter, bool) {
	k := s.knobs
	if k.Headers && org != s.org && hasTestHeader(r) {
		writeError(w, r, errorf(http.StatusForbidden, "the test headers X-Agentbox-Test-* are for keys of the server's organization %s only, and this key is of organization %s: send the request without them", s.org, org), nil)
		return w, false
	}
	id, route := s.requestRoute(r, org)
	if k.CountRequests {
		k.mu.Lock()
		if k.counts[id] == nil {
			k.counts[id] = RouteCount{}
		}
		k.counts[id][route]++
		k.mu.Unlock()
	}
	delay := k.Latency
	var hdrFault string
	if k.Headers {
		if v := r.Header.Get(HeaderTestLatency); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				writeError(w, r, errorf(http.StatusBadRequest, "%s: %q is not a duration such as 20ms", HeaderTestLatency, v), nil)
				return w, false
			}
			delay = d
		}
		hdrFault = r.Header.Get(HeaderTestFault)
		r.Header.Del(HeaderTestLatency)
		r.Header.Del(HeaderTestFault)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-r.Context().Done():
			t.Stop()
			return w, false
		case <-t.C:
		}
	}
	f, ok, err := k.pick(r, hdrFault)
	if err != nil {
		writeError(w, r, errorf(http.StatusBadRequest, "%s: %v", HeaderTestFault, err), nil)
		return w, false
	}
	if !ok {
		return w, true
	}
	return s.inject(w, r, f, id)
}

// pick returns the fault that hits r, if any, counting the hit: the one
// of its fault header hdr, else the first of the server's that matches.
func (k *knobs) pick(r *http.Request, hdr string) (Fault, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if hdr != "" {
		f, err := parseFault(hdr)
		if err != nil {
			return Fault{}, false, err
		}
		if !f.matches(r) || f.Times > 0 && k.byHdr[hdr] >= f.Times {
			return Fault{}, false, nil
		}
		k.byHdr[hdr]++
		return f, true, nil
	}
	for _, af := range k.faults {
		if af.matches(r) && (af.Times == 0 || af.hits < af.Times) {
			af.hits++
			return af.Fault, true, nil
		}
	}
	return Fault{}, false, nil
}

// inject makes f happen to r, which names sandbox id (or none: "").
func (s *Server) inject(w http.ResponseWriter, r *http.Request, f Fault, id string) (http.ResponseWriter, bool) {
	switch f.Kind {
	case FaultReset:
		resetConn(w)
		return w, false
	case FaultWebSocketDrop:
		return &droppingWriter{ResponseWriter: w}, true
	case FaultStop, FaultDelete:
		if id != "" {
			if err := s.behindBack(r.Context(), id, f.Kind == FaultDelete); err != nil {
				s.logf("agentbox serve: test fault %s on sandbox %s: %v", f.Kind, id, err)
			}
		}
		return w, true
	}
	st := f.status()
	if st == http.StatusTooManyRequests {
		secs := 1
		if f.RetryAfter > 0 {
			secs = int((f.RetryAfter + time.Second - 1) / time.Second)
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, r, errorf(st, "ThrottlerException: Too Many Requests"), nil)
		return w, false
	}
	writeError(w, r, errorf(st, "Injected fault (test knob %s)", f.Kind), nil)
	return w, false
}

// behindBack stops (or deletes) sandbox id through the engine alone, as
// if it had happened behind the server's back, and lets the server see it
// at once, as its reconciler would.
func (s *Server) behindBack(ctx context.Context, id string, remove bool) error {
	s.mu.Lock()
	rec := s.byID[id]
	s.mu.Unlock()
	if rec == nil {
		return nil
	}
	var err error
	if remove {
		err = s.eng.remove(ctx, id)
	} else {
		err = s.eng.stop(ctx, id)
	}
	if err != nil && !errNotFound(err) {
		return err
	}
	s.observe(ctx, rec)
	return nil
}

// hasTestHeader reports whether r carries one of the test knobs' headers.
func hasTestHeader(r *http.Request) bool {
	for _, h := range []string{HeaderTestLatency, HeaderTestFault, HeaderTestToolbox} {
		if _, ok := r.Header[h]; ok {
			return true
		}
	}
	return false
}

// requestRoute returns the id of the sandbox of organization org that r
// names ("" for none) and r's route: its method and path with that
// sandbox's id or name written {id}.
func (s *Server) requestRoute(r *http.Request, org string) (string, string) {
	path := r.URL.Path
	var key string
	var at int // index of the key's segment
	segs := strings.Split(path, "/")
	switch {
	case len(segs) > 3 && segs[1] == "api" && (segs[2] == "sandbox" || segs[2] == "toolbox") && segs[3] != "paginated":
		key, at = segs[3], 3
	case len(segs) > 2 && segs[1] == "toolbox":
		key, at = segs[2], 2
	default:
		return "", r.Method + " " + path
	}
	s.mu.Lock()
	id := key // no sandbox has that id: counted under it
	if rec := s.byID[key]; rec != nil && rec.org != org {
		id = "" // another organization's: not the caller's to fault
	} else if rec == nil {
		for _, rec := range s.byID {
			if rec.name == key && rec.org == org {
				id = rec.id
				break
			}
		}
	}
	s.mu.Unlock()
	segs[at] = "{id}"
	return id, r.Method + " " + strings.Join(segs, "/")
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// resetConn ends w's connection with a TCP reset, without answering.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server drops the connection
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// droppingWriter is a ResponseWriter whose hijacked connection closes
// after the first write: a WebSocket dropped after its first message.
type droppingWriter struct {
	http.ResponseWriter
}

// Hijack implements http.Hijacker.
func (d *droppingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(d.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &droppingConn{Conn: conn}, brw, nil
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (d *droppingWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// droppingConn closes itself after its first write.
type droppingConn struct {
	net.Conn
	once sync.Once
}

func (c *droppingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.once.Do(func() { c.Conn.Close() })
	return n, err
}
