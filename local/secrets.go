package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Secrets of a local sandbox (see docs/secrets.md): each command's
// environment holds, for each secret, its Name set to a placeholder made
// for this sandbox and this secret; the sandbox's egress proxy replaces
// the placeholder with the value in requests to the secret's hosts. The
// values are kept sealed in the sandbox's host folder (secrets_state.go),
// never in meta.json, Info, Instructions, the init's configuration, nor
// the argv or environment of any process; the proxy gets them over its
// control socket (secrets_linux.go).

// Where the sandbox finds the certificate of the state dir's secrets CA:
// written inside the sandbox by its toolbox (never by a host process
// following the sandbox's paths), with the CA alone and a bundle of the
// sandbox's system trust store and the CA. The sandbox's /tmp is its own
// and writable by every user it has.
const (
	secretsCAInside     = "/tmp/.agentbox-secrets/ca.pem"
	secretsBundleInside = "/tmp/.agentbox-secrets/ca-bundle.pem"
	// systemTrustStore is the usual system bundle (Debian, Ubuntu,
	// Alpine), which gets the CA too when the sandbox can write it.
	systemTrustStore = "/etc/ssl/certs/ca-certificates.crt"
)

// trustEnv returns the variables that make the usual clients trust the
// secrets CA inside: OpenSSL, curl, Python and git the bundle, Node the
// CA alone (it adds it to its own store).
func trustEnv() map[string]string {
	return map[string]string{
		"SSL_CERT_FILE":       secretsBundleInside,
		"REQUESTS_CA_BUNDLE":  secretsBundleInside,
		"CURL_CA_BUNDLE":      secretsBundleInside,
		"GIT_SSL_CAINFO":      secretsBundleInside,
		"NODE_EXTRA_CA_CERTS": secretsCAInside,
	}
}

// heldSecret is a secret of a sandbox with its placeholder.
type heldSecret struct {
	sandbox.Secret
	Placeholder string
}

// secretsEnv returns the variables a command of a sandbox holding held
// gets: each secret's placeholder and the trust variables; none when it
// holds no secret.
func secretsEnv(held []heldSecret) map[string]string {
	if len(held) == 0 {
		return nil
	}
	env := trustEnv()
	for _, h := range held {
		env[h.Name] = h.Placeholder
	}
	return env
}

// normalizeSecrets validates the secrets of a sandbox shaped by c and
// returns them in canonical form.
func normalizeSecrets(c *Config) ([]sandbox.Secret, error) {
	canon, err := sandbox.CanonicalSecrets(c.Secrets)
	if err != nil {
		return nil, fmt.Errorf("Config.Secrets: %w", err)
	}
	if len(canon) > 0 {
		if err := secretsNetworkOK(c); err != nil {
			return nil, err
		}
	}
	return canon, nil
}

// secretsNetworkOK reports why a sandbox shaped by c cannot hold
// secrets, or nil. In the host mode no proxy of the engine sees its
// traffic, so the placeholders could never be replaced; a blocked sandbox
// has nowhere to send them. Both are refused rather than accepted with a
// note, so that a caller learns at once that the secrets would not work.
func secretsNetworkOK(c *Config) error {
	switch networkMode(c) {
	case sandbox.NetworkHost:
		return fmt.Errorf("%w: secrets need the sandbox's traffic to pass the engine's egress proxy, and a sandbox in the host network mode shares the host's network: use the default mode or a domain allow list", sandbox.ErrInvalidSecret)
	case sandbox.NetworkBlocked:
		return fmt.Errorf("%w: a sandbox in the blocked network mode reaches no host to send a secret to: allow the secrets' hosts (Network.Domains) or use the default mode", sandbox.ErrInvalidSecret)
	}
	return nil
}

// withPlaceholders returns next with placeholders: a secret whose Name
// prev holds keeps its placeholder (so running processes keep working
// when its value rotates), a new one gets a new placeholder.
func withPlaceholders(prev []secretRecord, next []sandbox.Secret) []heldSecret {
	held := make([]heldSecret, 0, len(next))
	for _, s := range next {
		p := ""
		if i := slices.IndexFunc(prev, func(r secretRecord) bool { return r.Name == s.Name }); i >= 0 {
			p = prev[i].Placeholder
		}
		if p == "" {
			p = newPlaceholder()
		}
		held = append(held, heldSecret{Secret: s, Placeholder: p})
	}
	return held
}

// SetSecrets replaces the sandbox's secrets (Config.Secrets): commands
// started after it see the new placeholders, and the egress proxy
// substitutes the new values within the second. None detaches every
// secret. A secret whose Name the sandbox held keeps its placeholder, so
// that a rotated value reaches running processes' next requests. The
// secrets are checked whole first: bad input changes nothing. A sandbox
// that does not exist yet gets them when it is created.
func (s *Sandbox) SetSecrets(ctx context.Context, secrets []sandbox.Secret) error {
	canon, err := sandbox.CanonicalSecrets(secrets)
	if err != nil {
		return err
	}
	err = withSandboxLock(ctx, s.opts.StateDir, s.opts.ID, func(ctx context.Context, dir string, m *meta) error {
		if len(canon) > 0 {
			if err := secretsNetworkOK(&m.Config); err != nil {
				return err
			}
		}
		if statusOf(m) == sandbox.StatusPaused {
			return fmt.Errorf("set the secrets of sandbox %q: %w: it is paused, and its toolbox cannot take the new placeholders: resume it first", m.ID, sandbox.ErrInvalidState)
		}
		prev, err := readSecretsFile(dir)
		if err != nil {
			return err
		}
		held := withPlaceholders(prev.Secrets, canon)
		if err := writeSecrets(s.opts.StateDir, dir, m.ID, held, retiredNames(prev, canon)); err != nil {
			return err
		}
		if !m.alive() {
			return nil
		}
		return s.applySecretsLive(ctx, m, prev.Secrets, held)
	})
	if errors.Is(err, sandbox.ErrNotFound) {
		return s.shapeSecrets(canon)
	}
	return err
}

// retiredNames returns the names prev held or had retired that next
// does not hold.
func retiredNames(prev secretsRecord, next []sandbox.Secret) []string {
	var out []string
	names := slices.Clone(prev.Retired)
	for _, r := range prev.Secrets {
		names = append(names, r.Name)
	}
	for _, n := range names {
		if !slices.Contains(out, n) && !slices.ContainsFunc(next, func(s sandbox.Secret) bool { return s.Name == n }) {
			out = append(out, n)
		}
	}
	return out
}

// shapeSecrets makes canon the secrets of the sandbox this handle will
// create.
func (s *Sandbox) shapeSecrets(canon []sandbox.Secret) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.opts.Config
	next.Secrets = canon
	if len(canon) > 0 {
		if err := secretsNetworkOK(&next); err != nil {
			return err
		}
	}
	s.opts.Config = next
	return nil
}

// secretInfos returns what Info tells of the secrets of the sandbox
// folder dir (shaped by c: a sandbox not created yet has those of its
// Config): names and hosts, never values nor placeholders.
func secretInfos(dir string, c *Config) []sandbox.SecretInfo {
	recs, _ := readSecretRecords(dir)
	if len(recs) == 0 {
		recs = heldRecords(c.Secrets)
	}
	var out []sandbox.SecretInfo
	for _, r := range recs {
		out = append(out, sandbox.SecretInfo{Name: r.Name, Hosts: slices.Clone(r.Hosts), AllowHTTP: r.AllowHTTP})
	}
	return out
}

// addSecretsInfo adds to info what it tells of the secrets of the
// sandbox folder dir (shaped by c). Every network mode that accepts
// secrets substitutes them: the domain allow list through its proxy
// variables, the public and allowList modes through the redirect of
// ports 80 and 443 (redirect_linux.go).
func addSecretsInfo(dir string, c *Config, info *sandbox.Info) {
	info.Secrets = secretInfos(dir, c)
}

// heldRecords returns the records of secrets without placeholder or
// value: what Info tells of the secrets of a sandbox not created yet.
func heldRecords(secrets []sandbox.Secret) []secretRecord {
	var recs []secretRecord
	for _, s := range secrets {
		recs = append(recs, secretRecord{Name: s.Name, Hosts: s.Hosts, AllowHTTP: s.AllowHTTP})
	}
	return recs
}

// secretsInstructions is the sentence of Instructions about the secrets
// of the sandbox folder dir, or "".
func secretsInstructions(dir string, c *Config) string {
	infos := secretInfos(dir, c)
	if len(infos) == 0 {
		return ""
	}
	var parts []string
	for _, i := range infos {
		parts = append(parts, fmt.Sprintf("$%s (for %s)", i.Name, strings.Join(i.Hosts, ", ")))
	}
	if !c.hasDomains() {
		return fmt.Sprintf("Secrets: %s hold placeholders, not the values; send them as they are (in headers, the URL or a small body) to ports 443 or 80 and the sandbox's firewall has the egress proxy put the value in place in HTTPS requests to the hosts listed; elsewhere they stay placeholders.",
			strings.Join(parts, ", "))
	}
	return fmt.Sprintf("Secrets: %s hold placeholders, not the values; send them as they are (in headers, the URL or a small body) and the egress proxy (HTTPS_PROXY) puts the value in place in HTTPS requests to the hosts listed; elsewhere they stay placeholders.",
		strings.Join(parts, ", "))
}

// mergeSecretsEnv returns perCall over the placeholders and trust
// variables of the sandbox folder dir (perCall wins).
func mergeSecretsEnv(dir string, perCall map[string]string) map[string]string {
	r, _ := readSecretsFile(dir)
	env := secretsEnv(heldOf(r.Secrets))
	if env == nil && len(r.Retired) == 0 {
		return perCall
	}
	if env == nil {
		env = map[string]string{}
	}
	for _, n := range r.Retired {
		env[n] = "" // an empty variable: no secret any more
	}
	maps.Copy(env, perCall)
	return env
}

// heldOf returns the placeholders of recs, without values.
func heldOf(recs []secretRecord) []heldSecret {
	held := make([]heldSecret, 0, len(recs))
	for _, r := range recs {
		held = append(held, heldSecret{Secret: sandbox.Secret{Name: r.Name, Hosts: r.Hosts, AllowHTTP: r.AllowHTTP}, Placeholder: r.Placeholder})
	}
	return held
}
