package local

import (
	"context"
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// SetSecrets replaces the sandbox's secrets (Config.Secrets): commands
// started after it see the new placeholders, and the egress proxy
// substitutes the new values within the second. None detaches every
// secret.
func (s *Sandbox) SetSecrets(ctx context.Context, secrets []sandbox.Secret) error {
	return fmt.Errorf("%w: secrets are not built yet", sandbox.ErrUnsupported)
}
