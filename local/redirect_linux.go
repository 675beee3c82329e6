package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/agentbox-dev/agentbox/local/internal/netfilter"
)

// The secrets' redirect mode (docs/secrets.md): a sandbox in the public
// mode, or the allowList mode with address ranges only, that holds
// secrets has its outgoing TCP connections to ports 80 and 443 redirected
// by a table in its own network namespace (netfilter.InstallRedirect,
// written by the host: the namespace is the host's user namespace's, so
// the sandbox's root cannot change it) to listening sockets on
// 127.0.0.1 / [::1] :3129 there, which the host makes and hands to the
// state dir's shared egress proxy with the sandbox's secrets; the proxy
// serves them with the sandbox's secretproxy.Proxy.ServeTransparent, and
// dials upstream with sockets of the sandbox's netsock process
// (netsock_linux.go), so that upstream connections leave from the
// sandbox's namespace, through its firewall.
//
// The table is written when the sandbox boots with secrets or SetSecrets
// adds the first, and deleted when the last goes; it goes with the
// namespace when the sandbox stops. The heal path (the proxy restarted on
// the next command or Info) makes new listening sockets and a new netsock
// process.

// redirectsSecrets reports whether the running sandbox m serves its
// secrets through the redirect: it has a link of its own, no domain allow
// list, and secrets in its folder.
func redirectsSecrets(stateDir string, m *meta) bool {
	if !redirectMode(m) {
		return false
	}
	recs, _ := readSecretRecords(sandboxDir(stateDir, m.ID))
	return len(recs) > 0
}

// redirectMode reports whether the secrets of the sandbox m would be
// served through the redirect: the host made its namespace and link, and
// it has no domain allow list.
func redirectMode(m *meta) bool {
	return m.Network != nil && m.Config.needsInterface() && !m.Config.hasDomains()
}

// startRedirect has the state dir's shared proxy serve the redirect of
// the sandbox m, just booted, when it holds secrets.
func (s *Sandbox) startRedirect(ctx context.Context, m *meta) error {
	if !redirectsSecrets(s.opts.StateDir, m) {
		return nil
	}
	return withEgress(ctx, s.opts.StateDir, m.ID, func(c *egressClient) error { return c.serveRedirect(m, s.egressTest) })
}

// withEgress runs f with the state dir's shared proxy, started when none
// runs (and then serving every running sandbox that needs it but skip).
func withEgress(ctx context.Context, stateDir, skip string, f func(*egressClient) error) error {
	c, err := openEgress(ctx, stateDir, true)
	if err != nil {
		return err
	}
	defer c.close()
	c.serveRunning(skip)
	return f(c)
}

// serveRedirect sets up the redirect of the running sandbox m: its
// listening sockets on :3129 and its netsock process, handed to the
// proxy with its secrets, then its table.
func (c *egressClient) serveRedirect(m *meta, hooks egressTestHooks) error {
	sbx, err := openInitNetns(m.Init)
	if err != nil {
		return fmt.Errorf("secrets redirect: %w", err)
	}
	defer sbx.Close()
	var lns []*os.File
	err = inNetns(sbx, func() (err error) { lns, err = loopbackListeners(strconv.Itoa(netfilter.RedirectPort)); return err })
	if err != nil {
		return fmt.Errorf("secrets redirect: listen in the sandbox on port %d (a process of the sandbox may hold it: restart the sandbox): %w", netfilter.RedirectPort, err)
	}
	defer closeFiles(lns)
	end, err := startNetsock(sbx, m.Init)
	if err != nil {
		return err
	}
	defer end.Close()
	if err := c.serve(m, nil, hooks); err != nil {
		return err
	}
	if _, err := c.call(egressRequest{Op: "redirect", ID: m.ID, egressTestHooks: hooks}, append([]*os.File{end}, lns...)); err != nil {
		return err
	}
	return netfilter.InstallRedirect(sbx)
}

// applyRedirectSecrets brings the redirect of the running sandbox m in
// line with its new secrets held (already in its folder): none removes
// its table and has the proxy forget it; otherwise the proxy that serves
// it gets the new secrets, or it is served anew.
func (s *Sandbox) applyRedirectSecrets(ctx context.Context, m *meta, held []heldSecret) error {
	if !redirectMode(m) {
		return nil
	}
	if len(held) == 0 {
		return stopRedirect(ctx, s.opts.StateDir, m)
	}
	f, err := secretsMemfd(s.opts.StateDir, held)
	if err != nil {
		return err
	}
	defer f.Close()
	return withEgress(ctx, s.opts.StateDir, m.ID, func(c *egressClient) error {
		if _, err := c.call(egressRequest{Op: "secrets", ID: m.ID, Secrets: true, egressTestHooks: s.egressTest}, []*os.File{f}); err == nil {
			return nil
		}
		return c.serveRedirect(m, s.egressTest)
	})
}

// stopRedirect deletes the redirect table of the running sandbox m and
// has the proxy forget it (its netsock process exits).
func stopRedirect(ctx context.Context, stateDir string, m *meta) error {
	sbx, err := openInitNetns(m.Init)
	if err != nil {
		return fmt.Errorf("secrets redirect: %w", err)
	}
	defer sbx.Close()
	err = netfilter.RemoveRedirect(sbx)
	dropEgress(ctx, stateDir, m.ID)
	return err
}

// syncRedirect brings the secrets' redirect of the running sandbox m in
// line with its Config, just changed: served anew when it needs it (a
// change of mode drops its earlier proxy), else its table removed (none:
// nothing to do).
func (s *Sandbox) syncRedirect(ctx context.Context, m *meta) error {
	if m.Network == nil {
		return nil
	}
	if redirectsSecrets(s.opts.StateDir, m) {
		return withEgress(ctx, s.opts.StateDir, m.ID, func(c *egressClient) error { return c.serveRedirect(m, s.egressTest) })
	}
	sbx, err := openInitNetns(m.Init)
	if err != nil {
		return fmt.Errorf("secrets redirect: %w", err)
	}
	defer sbx.Close()
	return netfilter.RemoveRedirect(sbx)
}

// serveAgain has the proxy (just started again) serve the running
// sandbox m when it needs it: its domain allow list, or its secrets'
// redirect.
func (c *egressClient) serveAgain(m *meta, hooks egressTestHooks) error {
	switch {
	case m.Config.hasDomains():
		lns, err := takeEgressListeners(m)
		if err != nil {
			return err
		}
		defer closeFiles(lns)
		return c.serve(m, lns, hooks)
	case redirectsSecrets(c.stateDir, m):
		return c.serveRedirect(m, hooks)
	}
	return errors.New("the sandbox needs no egress proxy")
}

// needsEgress reports whether the running sandbox m needs the shared
// proxy.
func needsEgress(stateDir string, m *meta) bool {
	return m.Config.hasDomains() || redirectsSecrets(stateDir, m)
}
