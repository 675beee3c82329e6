package local

import (
	"context"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Forkable is a Sandbox whose Fork returns a [sandbox.Sandbox], so that it
// satisfies [sandbox.Forker] (Sandbox.Fork returns the *Sandbox).
type Forkable struct{ *Sandbox }

var _ sandbox.Forker = Forkable{}

// Fork is [Sandbox.Fork].
func (f Forkable) Fork(ctx context.Context, opts sandbox.ForkOptions) (sandbox.Sandbox, error) {
	fork, err := f.Sandbox.Fork(ctx, opts)
	if err != nil {
		return nil, err
	}
	return Forkable{fork}, nil
}
