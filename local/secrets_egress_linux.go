package local

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/secretproxy"
)

// Secrets in the DomainAllowList mode: the shared egress proxy
// (egressd_linux.go) gets, for each sandbox with secrets, a
// secretproxy.Proxy as its egress proxy's Intercept, dialing through that
// egress proxy (so its policy holds). The engine hands the secrets and
// the CA (key included) to it as a sealed memfd with the "serve" request
// and with "secrets", which replaces them live: never in argv, the
// environment, nor a file the proxy opens by name.

// egressSecretsFile is what the memfd holds.
type egressSecretsFile struct {
	CACert  string         `json:"caCert"`
	CAKey   string         `json:"caKey"`
	Secrets []egressSecret `json:"secrets"`
}

// egressSecret is one secret in egressSecretsFile.
type egressSecret struct {
	Name        string   `json:"name"`
	Placeholder string   `json:"placeholder"`
	Value       string   `json:"value"`
	Hosts       []string `json:"hosts"`
	AllowHTTP   bool     `json:"allowHTTP,omitempty"`
}

// secretsMemfd returns a sealed memfd holding the secrets held and the
// state dir's CA, or nil when held is empty.
func secretsMemfd(stateDir string, held []heldSecret) (*os.File, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ca, err := loadSecretsCA(stateDir)
	if err != nil {
		return nil, err
	}
	sf := egressSecretsFile{CACert: string(ca.CertPEM()), CAKey: string(ca.KeyPEM())}
	for _, h := range held {
		sf.Secrets = append(sf.Secrets, egressSecret{Name: h.Name, Placeholder: h.Placeholder, Value: h.Value, Hosts: h.Hosts, AllowHTTP: h.AllowHTTP})
	}
	b, err := json.Marshal(sf)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("agentbox-secrets", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("secrets for the egress proxy: %w", err)
	}
	f := os.NewFile(uintptr(fd), "secrets")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("secrets for the egress proxy: %w", err)
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("secrets for the egress proxy: seal: %w", err)
	}
	return f, nil
}

// egressSecretsOf returns the memfd of the secrets of the sandbox id, or
// nil when it has none.
func egressSecretsOf(stateDir, id string) (*os.File, error) {
	held, err := openSecrets(stateDir, sandboxDir(stateDir, id), id)
	if err != nil {
		return nil, err
	}
	return secretsMemfd(stateDir, held)
}

// applyEgressSecrets tells the shared proxy, when it serves the running
// sandbox m (which has a domain allow list), the sandbox's new secrets
// held. A proxy that does not run gets them when it is started again
// (healEgress reads them from the sandbox's folder). A sandbox without a
// domain allow list has its redirect brought in line.
func (s *Sandbox) applyEgressSecrets(ctx context.Context, m *meta, held []heldSecret) error {
	if !m.Config.hasDomains() {
		return s.applyRedirectSecrets(ctx, m, held)
	}
	c, err := openEgress(ctx, s.opts.StateDir, false)
	if errors.Is(err, errEgressNotRunning) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.close()
	f, err := secretsMemfd(s.opts.StateDir, held)
	if err != nil {
		return err
	}
	var files []*os.File
	if f != nil {
		defer f.Close()
		files = append(files, f)
	}
	_, err = c.call(egressRequest{Op: "secrets", ID: m.ID, Secrets: f != nil, egressTestHooks: s.egressTest}, files)
	return err
}

// newSecretsProxy returns the substituting proxy that the egress proxy
// of a sandbox intercepts with, of the secrets in the memfd f, dialing
// upstream with dial, reporting its events to rec; rootsPEM (tests) are
// the upstream roots, else the host's.
func newSecretsProxy(f *os.File, dial func(context.Context, string, uint16) (net.Conn, error), rec *policyRecorder, rootsPEM string) (*secretproxy.Proxy, error) {
	sf, err := readEgressSecrets(f)
	if err != nil {
		return nil, err
	}
	ca, err := secretproxy.ParseCA([]byte(sf.CACert), []byte(sf.CAKey))
	if err != nil {
		return nil, err
	}
	var roots *x509.CertPool
	if rootsPEM != "" {
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM([]byte(rootsPEM))
	}
	return secretproxy.New(secretproxy.Config{
		CA: ca, Secrets: proxySecrets(sf), RootCAs: roots, Dial: dial,
		OnEvent: func(e secretproxy.Event) { rec.add(secretRefusal(e)) },
	})
}

// readEgressSecrets reads the memfd f.
func readEgressSecrets(f *os.File) (*egressSecretsFile, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read the secrets: %w", err)
	}
	var sf egressSecretsFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return nil, fmt.Errorf("read the secrets: %w", err)
	}
	return &sf, nil
}

// proxySecrets returns the secrets of sf as the proxy holds them.
func proxySecrets(sf *egressSecretsFile) []secretproxy.Secret {
	out := make([]secretproxy.Secret, 0, len(sf.Secrets))
	for _, s := range sf.Secrets {
		out = append(out, secretproxy.Secret{Name: s.Name, Placeholder: s.Placeholder, Value: s.Value, Hosts: s.Hosts, AllowHTTP: s.AllowHTTP})
	}
	return out
}

// secretRefusal is the policy log entry of a proxy event.
func secretRefusal(e secretproxy.Event) egress.Refusal {
	r := egress.Refusal{Time: e.Time, Protocol: e.Protocol, Host: e.Host, Port: e.Port, Reason: e.Reason}
	if e.Secret != "" {
		r.Reason = fmt.Sprintf("secret %s: %s", e.Secret, e.Reason)
	}
	return r
}

// setSecrets replaces the secrets of the sandbox id's proxy with those of
// the memfd f (nil: none, no interception any more).
func (s *egressServer) setSecrets(req *egressRequest, files []*os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.boxes[req.ID]
	if b == nil {
		return fmt.Errorf("sandbox %q is not served", req.ID)
	}
	return b.setSecrets(req, files)
}

// setSecrets makes the secrets of the memfd files[0] (none when
// !req.Secrets) those of b's proxy.
func (b *egressBox) setSecrets(req *egressRequest, files []*os.File) error {
	if !req.Secrets {
		b.p.SetIntercept(nil)
		if b.sp != nil {
			b.sp.Close()
			b.sp = nil
		}
		return nil
	}
	if len(files) < 1 {
		return errors.New("secrets: want the secrets' memfd")
	}
	if b.sp != nil {
		sf, err := readEgressSecrets(files[0])
		if err != nil {
			return err
		}
		return b.sp.SetSecrets(proxySecrets(sf))
	}
	sp, err := newSecretsProxy(files[0], b.upstream, b.rec, req.RootCAs)
	if err != nil {
		return err
	}
	b.sp = sp
	b.p.SetIntercept(sp)
	return nil
}
