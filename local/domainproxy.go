package local

import (
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The DomainAllowList network mode. The sandbox has a network namespace
// of its own with loopback only, as with NetworkBlockAll. One process per
// state dir on the host side, this program re-executed as
// "agentbox-netproxy" outside every namespace of the sandboxes, serves
// the egress proxy (package internal/egress) of every running sandbox of
// the state dir that has a domain allow list, each with its own list,
// connection limit and policy log (egressd_linux.go); commands get the
// proxy variables naming 127.0.0.1:3128. Nothing inside resolves names:
// no resolver is reachable, and names resolve only through the proxy.
//
// The sockets listening on 127.0.0.1:3128 and [::1]:3128 belong to the
// sandbox's network namespace, where the init makes them; it hands them
// to the host with its "ok", and the host to the proxy. So the proxy
// accepts the sandbox's connections itself and dials out from the host's
// namespace: no byte is relayed by the init, nor through a unix socket
// bound into the sandbox (a first version did so, and the extra hop
// halved the throughput; see BenchmarkDomainProxyDownload). The init
// keeps a descriptor of each socket for as long as it lives, so the
// sockets, and the sandbox's connections waiting in their queues,
// outlive a proxy that dies: the engine takes them from the init
// (pidfd_getfd) for the next one, which it starts on the sandbox's next
// command or Info (egressclient_linux.go).
//
// The proxy is started by the first sandbox that needs it, by whichever
// engine process boots it; it watches each sandbox's init through a
// pidfd (so an init that stops itself when idle is forgotten with no
// host process involved), Stop and Destroy tell it to forget theirs, and
// it exits when it serves no sandbox. Started by root, it runs as nobody
// (65534), with no_new_privs: it needs no privilege, only the
// descriptors it is given (its control socket, each sandbox's listening
// sockets and policy log file).

// Names of the DomainAllowList mode.
const (
	// egressProxyAddr is where commands find the proxy inside.
	egressProxyAddr = "127.0.0.1:3128"
	// egressLogFile, in the sandbox's folder, is the policy log.
	egressLogFile = "egress-log.json"
	// egressLogKeep is how many refusals the policy log file keeps.
	egressLogKeep = 32
)

// commandHost is the Host of a sandbox's process manager: its Lifecycle,
// whose environment overlay it completes with the egress proxy's
// variables when the sandbox's domain allow list was changed while it
// runs (the init's own environment is the one it started with): set when
// a list was added, emptied when it was removed.
type commandHost struct{ s *Sandbox }

func (h commandHost) EnsureRunning(ctx context.Context) error {
	if err := h.s.resumeBeforeUse(ctx); err != nil {
		return &sandbox.NotReadyError{ID: h.s.opts.ID, Err: err}
	}
	if err := h.s.Lifecycle.EnsureRunning(ctx); err != nil {
		return err
	}
	if c := h.s.config(); healsEgress(h.s.dir, &c) {
		h.s.healEgress(ctx)
	}
	return nil
}

func (h commandHost) MergeEnv(perCall map[string]string) (map[string]string, error) {
	perCall = mergeSecretsEnv(h.s.dir, perCall)
	h.s.mu.Lock()
	c, booted := h.s.opts.Config, h.s.proxyEnv
	h.s.mu.Unlock()
	if c.hasDomains() == booted {
		return h.s.Lifecycle.MergeEnv(perCall)
	}
	proxy := map[string]string{}
	for _, kv := range egressEnv(&Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Domains: []string{"-"}}}) {
		k, v, _ := strings.Cut(kv, "=")
		if booted {
			v = "" // no proxy any more: an empty variable means none
		}
		proxy[k] = v
	}
	for k, v := range perCall {
		proxy[k] = v
	}
	return h.s.Lifecycle.MergeEnv(proxy)
}

// egressEnv returns the proxy variables of a sandbox with a domain allow
// list: every usual client (curl, git, pip, npm, Go) goes through the
// proxy, SOCKS clients with names resolved by it (socks5h), and loopback
// stays direct.
func egressEnv(c *Config) []string {
	if !c.hasDomains() {
		return nil
	}
	const httpProxy, socksProxy, direct = "http://" + egressProxyAddr, "socks5h://" + egressProxyAddr, "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + httpProxy, "HTTPS_PROXY=" + httpProxy, "http_proxy=" + httpProxy, "https_proxy=" + httpProxy,
		"ALL_PROXY=" + socksProxy, "all_proxy=" + socksProxy, "NO_PROXY=" + direct, "no_proxy=" + direct,
	}
}

// egressTestHooks let tests resolve made-up names (and only them) and
// reach their loopback servers; they are set only through export_test.go
// and never persisted: a proxy started again after one died serves the
// sandboxes of other handles without them.
type egressTestHooks struct {
	Hosts          map[string][]netip.Addr `json:"hosts,omitempty"`
	AllowNonPublic bool                    `json:"allowNonPublic,omitempty"`
	// RootCAs (PEM) verify the upstream hosts of secrets in place of the
	// host's trust store: the tests' own CA.
	RootCAs string `json:"rootCAs,omitempty"`
}

// policyLog is the policy log file of a sandbox folder (egressLogFile):
// the last refusals of its egress proxy, oldest first, and how many there
// were since the sandbox was created.
type policyLog struct {
	Total    uint64           `json:"total"`
	Refusals []egress.Refusal `json:"refusals"`
}

// readPolicyLogFile reads the policy log from f, under a shared lock
// (the helper rewrites it under an exclusive one).
func readPolicyLogFile(f *os.File) (policyLog, error) {
	var l policyLog
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		return l, err
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil || len(b) == 0 {
		return l, err
	}
	return l, json.Unmarshal(b, &l)
}

// readPolicyLog reads the policy log of the sandbox folder dir.
func readPolicyLog(dir string) (policyLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, egressLogFile), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return policyLog{}, err
	}
	defer f.Close()
	return readPolicyLogFile(f)
}

// addPolicyLog adds to n, the network of the sandbox of the folder dir
// (metadata m), its egress proxy's refusals, and a note when the proxy
// should serve it but does not.
func addPolicyLog(dir string, m *meta, n *sandbox.NetworkInfo) {
	if !m.Config.hasDomains() {
		return
	}
	if m.alive() && !egressServes(context.Background(), filepath.Dir(filepath.Dir(dir)), m.ID) {
		n.Note = joinNote(n.Note, "the egress proxy does not serve the sandbox: restart it")
	}
	l, _ := readPolicyLog(dir)
	n.RefusedConnections = l.Total
	for _, r := range l.Refusals {
		n.PolicyLog = append(n.PolicyLog, sandbox.NetworkRefusal{Time: r.Time, Protocol: r.Protocol, Host: r.Host, Port: int(r.Port), Reason: r.Reason})
	}
}

// joinNote appends the sentence s to the note n.
func joinNote(n, s string) string {
	if n == "" {
		return s
	}
	return n + "; " + s
}
