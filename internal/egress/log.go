package egress

import (
	"strconv"
	"sync"
	"time"
)

// Refusal is one entry of the policy log: a connection or request the
// proxy refused by policy.
type Refusal struct {
	Time time.Time `json:"time"`
	// Protocol is how the client asked: "http" (absolute-URI request),
	// "connect", "socks5", "tls" (the ClientHello of a tunnel),
	// "tunnel-http" (a request inside a tunnel) or "proxy" (before a
	// protocol was known, e.g. at the connection limit).
	Protocol string `json:"protocol"`
	// Host is the host the client asked for, as it gave it (non-printable
	// bytes replaced by '?', at most 255 bytes).
	Host   string `json:"host,omitempty"`
	Port   uint16 `json:"port,omitempty"`
	Reason string `json:"reason"`
}

// String formats r as one line: time, protocol, host:port and reason.
func (r Refusal) String() string {
	target := r.Host
	if r.Port != 0 {
		target += ":" + strconv.Itoa(int(r.Port))
	}
	if target == "" {
		target = "-"
	}
	return r.Time.UTC().Format(time.RFC3339) + " " + r.Protocol + " " + target + ": " + r.Reason
}

// policyLog keeps the last refusals in a ring, and counts them all.
type policyLog struct {
	mu    sync.Mutex
	ring  []Refusal
	next  int // where the next refusal goes once the ring is full
	total uint64
}

func newPolicyLog(size int) *policyLog {
	return &policyLog{ring: make([]Refusal, 0, size)}
}

func (l *policyLog) add(r Refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if len(l.ring) < cap(l.ring) {
		l.ring = append(l.ring, r)
		return
	}
	l.ring[l.next] = r
	l.next = (l.next + 1) % len(l.ring)
}

// list returns the kept refusals, oldest first, and the count of all.
func (l *policyLog) list() ([]Refusal, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Refusal, 0, len(l.ring))
	out = append(out, l.ring[l.next:]...)
	out = append(out, l.ring[:l.next]...)
	return out, l.total
}
