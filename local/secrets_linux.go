package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"

	"github.com/agentbox-dev/agentbox/internal/secretproxy"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// How a sandbox's secrets take effect (see secrets.go): at boot and on
// SetSecrets, the toolbox of the sandbox's init (inside the sandbox: no
// host process follows the sandbox's paths) writes the CA's certificate
// and a trust bundle, and its base environment gets the placeholders and
// the trust variables, so that every process it starts from then on has
// them, those it starts on its own too (serve's Daytona SDK clients talk
// to it directly). Commands run through this package get them again from
// commandHost.MergeEnv, as pooled toolbox sessions keep the environment
// they started with.

// loadSecretsCA returns the CA of the state dir, made the first time.
func loadSecretsCA(stateDir string) (*secretproxy.CA, error) {
	ca, err := secretproxy.LoadOrCreateCA(filepath.Join(stateDir, secretsCADir))
	if err != nil {
		return nil, stateDirError(stateDir, fmt.Errorf("secrets CA: %w", err))
	}
	return ca, nil
}

// keepSecrets writes the secrets of a sandbox being created (its
// Config.Secrets, never in meta.json) to its folder, with new
// placeholders.
func (b *booting) keepSecrets() error {
	if len(b.m.Config.Secrets) == 0 {
		return nil
	}
	recs, err := readSecretRecords(b.dir)
	if err != nil {
		return err
	}
	return writeSecrets(b.s.opts.StateDir, b.dir, b.m.ID, withPlaceholders(recs, b.m.Config.Secrets), nil)
}

// secretsInside puts the sandbox's secrets in its environment, once its
// init serves.
func (b *booting) secretsInside() error {
	recs, err := readSecretRecords(b.dir)
	if err != nil || len(recs) == 0 {
		return err
	}
	return b.s.installSecrets(b.ctx, heldOf(recs))
}

// installSecrets has the running sandbox's toolbox trust the CA and give
// the processes it starts the placeholders of held (and no other
// placeholder): none removes them all, and the trust variables.
func (s *Sandbox) installSecrets(ctx context.Context, held []heldSecret) error {
	req := toolbox.UpdateEnvRequest{Set: secretsEnv(held), UnsetValuePrefix: secretproxy.PlaceholderPrefix}
	if len(held) == 0 {
		req.Unset = append(req.Unset, slices.Sorted(maps.Keys(trustEnv()))...)
	} else {
		ca, err := loadSecretsCA(s.opts.StateDir)
		if err != nil {
			return err
		}
		if err := s.trustInside(ctx, ca.CertPEM()); err != nil {
			return fmt.Errorf("secrets: make the sandbox trust the secrets CA: %w", err)
		}
	}
	if err := s.client.UpdateEnv(ctx, req); err != nil {
		return fmt.Errorf("secrets: give the sandbox's processes their placeholders: %w", err)
	}
	return nil
}

// trustInside writes, through the toolbox, the CA certificate caPEM and
// the bundle of the sandbox's system trust store and the CA where the
// trust variables name them, and adds the CA to the system store when
// the sandbox may write it (its root's own file; a sandbox whose user
// may not is left as it is).
func (s *Sandbox) trustInside(ctx context.Context, caPEM []byte) error {
	system := s.readInside(ctx, systemTrustStore)
	bundle := system
	if !bytes.Contains(system, caPEM) {
		bundle = append(append(bytes.Clone(system), '\n'), caPEM...)
	}
	err := s.client.Upload(ctx,
		toolbox.UploadFile{Path: secretsCAInside, Content: bytes.NewReader(caPEM)},
		toolbox.UploadFile{Path: secretsBundleInside, Content: bytes.NewReader(bundle)})
	if err != nil {
		return err
	}
	if len(system) > 0 && !bytes.Contains(system, caPEM) {
		_ = s.client.Upload(ctx, toolbox.UploadFile{Path: systemTrustStore, Content: bytes.NewReader(bundle)})
	}
	return nil
}

// readInside returns the file p of the sandbox (at most 8 MiB), read by
// its toolbox, or nothing.
func (s *Sandbox) readInside(ctx context.Context, p string) []byte {
	rc, err := s.client.Download(ctx, p)
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 8<<20))
	return b
}

// applySecretsLive brings the running sandbox m in line with its new
// secrets held (prev were its records): its toolbox's environment and
// trust, and its egress proxy.
func (s *Sandbox) applySecretsLive(ctx context.Context, m *meta, prev []secretRecord, held []heldSecret) error {
	if err := s.installSecrets(ctx, held); err != nil {
		return err
	}
	return s.applyEgressSecrets(ctx, m, held)
}
