package sandbox

import "context"

// Forker is implemented by sandboxes that can be forked: Fork makes a new
// sandbox with a copy of this one's files, configuration and network
// policy, running when this one runs and stopped when it is stopped. The
// source keeps running; after the fork, writes on either side are not seen
// by the other. It fails with an error matching ErrNotFound when the
// source does not exist, ErrInvalidArgument for a bad or taken ID, and
// ErrInvalidState when the source is being destroyed; nothing is created
// then.
type Forker interface {
	Fork(ctx context.Context, opts ForkOptions) (Sandbox, error)
}

// ForkOptions name the sandbox a Fork makes.
type ForkOptions struct {
	// ID is the new sandbox's id; empty makes the engine generate one.
	ID string
	// Name is the new sandbox's name; empty keeps none.
	Name string
	// Labels are the new sandbox's labels; nil keeps the source's.
	Labels map[string]string
}
