package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Both engines have secrets: the local engine's in the state dir
// (local.SecretStore), the daytona engine's on the control plane.
var (
	_ cli.SecretEngine = localEngine{}
	_ cli.SecretEngine = daytonaEngine{}
)

// localSecrets resolves a new local sandbox's --secret references.
func localSecrets(stateDir string, refs map[string]string) ([]sandbox.Secret, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	st, err := local.OpenSecretStore(stateDir)
	if err == nil {
		var secrets []sandbox.Secret
		if secrets, err = st.Resolve(refs); err == nil {
			return secrets, nil
		}
	}
	return nil, fmt.Errorf("--secret: %w", err)
}

func localSecretInfo(s local.StoredSecret) *cli.SecretInfo {
	return &cli.SecretInfo{Name: s.Name, Hosts: s.Hosts, AllowHTTP: s.AllowHTTP, Description: s.Description, Created: s.Created, Updated: s.Updated}
}

func (localEngine) CreateSecret(_ context.Context, stateDir string, spec cli.SecretSpec) (*cli.SecretInfo, error) {
	st, err := local.OpenSecretStore(stateDir)
	if err != nil {
		return nil, err
	}
	s, err := st.Create(sandbox.Secret{Name: spec.Name, Value: spec.Value, Hosts: spec.Hosts, AllowHTTP: spec.AllowHTTP}, spec.Description)
	if err != nil {
		return nil, err
	}
	return localSecretInfo(s), nil
}

func (localEngine) Secrets(_ context.Context, stateDir string) ([]cli.SecretInfo, error) {
	st, err := local.OpenSecretStore(stateDir)
	if err != nil {
		return nil, err
	}
	list, err := st.List()
	out := make([]cli.SecretInfo, len(list))
	for i, s := range list {
		out[i] = *localSecretInfo(s)
	}
	return out, err
}

func (localEngine) UpdateSecret(_ context.Context, stateDir, name string, c cli.SecretChange) (*cli.SecretInfo, error) {
	st, err := local.OpenSecretStore(stateDir)
	if err != nil {
		return nil, err
	}
	s, err := st.Update(name, c.Value, c.Hosts)
	if err != nil {
		return nil, err
	}
	return localSecretInfo(s), nil
}

func (localEngine) RemoveSecret(_ context.Context, stateDir, name string) error {
	st, err := local.OpenSecretStore(stateDir)
	if err != nil {
		return err
	}
	return st.Delete(name)
}

// daytonaSecretInfo describes the control plane's secret s.
func daytonaSecretInfo(s *daytona.Secret) *cli.SecretInfo {
	created, _ := time.Parse(time.RFC3339Nano, s.CreatedAt)
	updated, _ := time.Parse(time.RFC3339Nano, s.UpdatedAt)
	return &cli.SecretInfo{Name: s.Name, ID: s.ID, Hosts: s.Hosts, Description: s.Description, Placeholder: s.Placeholder, Created: created, Updated: updated}
}

// existsIfConflict makes a 409 (a name taken) match fs.ErrExist, as the
// CLI expects.
func existsIfConflict(err error) error {
	if errors.Is(err, daytona.ErrConflict) {
		return fmt.Errorf("%w (%w)", err, fs.ErrExist)
	}
	return err
}

func (daytonaEngine) CreateSecret(ctx context.Context, _ string, spec cli.SecretSpec) (*cli.SecretInfo, error) {
	if spec.AllowHTTP {
		return nil, fmt.Errorf("%w: --allow-http is the local engine's: Daytona substitutes secrets over TLS only", sandbox.ErrUnsupported)
	}
	return withClient(func(c *daytona.Client) (*cli.SecretInfo, error) {
		s, err := c.Secrets().Create(ctx, daytona.SecretSpec{Name: spec.Name, Value: spec.Value, Description: spec.Description, Hosts: spec.Hosts})
		if err != nil {
			return nil, existsIfConflict(err)
		}
		return daytonaSecretInfo(s), nil
	})
}

func (daytonaEngine) Secrets(ctx context.Context, _ string) ([]cli.SecretInfo, error) {
	return withClient(func(c *daytona.Client) ([]cli.SecretInfo, error) {
		var out []cli.SecretInfo
		for s, err := range c.Secrets().All(ctx) {
			if err != nil {
				return nil, err
			}
			out = append(out, *daytonaSecretInfo(s))
		}
		return out, nil
	})
}

func (daytonaEngine) UpdateSecret(ctx context.Context, _, name string, change cli.SecretChange) (*cli.SecretInfo, error) {
	return withClient(func(c *daytona.Client) (*cli.SecretInfo, error) {
		s, err := c.Secrets().ByName(ctx, name)
		if err == nil {
			s, err = c.Secrets().Update(ctx, s.ID, daytona.SecretUpdate{Value: change.Value, Hosts: change.Hosts})
		}
		if err != nil {
			return nil, err
		}
		return daytonaSecretInfo(s), nil
	})
}

func (daytonaEngine) RemoveSecret(ctx context.Context, _, name string) error {
	_, err := withClient(func(c *daytona.Client) (struct{}, error) {
		s, err := c.Secrets().ByName(ctx, name)
		if err == nil {
			err = c.Secrets().Delete(ctx, s.ID)
		}
		return struct{}{}, err
	})
	return err
}
