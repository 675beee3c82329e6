package toolbox

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// FollowOptions tune FollowLogsWith.
type FollowOptions struct {
	// Exit, when set, delivers the command's exit code once the caller
	// has learned it by other means than this follow (a request that
	// returns when the command ends, as the process manager's waiter
	// does on Daytona's daemon); closed without a value, it means that no
	// code will come. A follow without the frames extension then looks at
	// the command (GET …/command/{id}) no more while the code may still
	// come: it waits for it up to ExitGrace before it opens a socket (a
	// short command's log is then read whole in one request), and once it
	// has it, it leaves the socket as soon as that has been quiet for a
	// moment and reads the log's rest. A server with frames ignores it.
	Exit <-chan int
	// ExitGrace, with Exit, is how long the follow waits for the exit code
	// before it opens a socket. Default (0): DefaultExitGrace.
	ExitGrace time.Duration
}

// DefaultExitGrace is how long, by default, a follow with
// FollowOptions.Exit waits for the exit code before it opens a socket:
// somewhat more than Daytona's daemon takes to answer a request that waits
// for a short command (its sync exec looks for the command's exit code
// file every 50 ms). A longer command's first output comes this much
// later, never lost (the socket replays the log).
const DefaultExitGrace = 100 * time.Millisecond

// FollowLogsWith is FollowLogs with options.
func (c *Client) FollowLogsWith(ctx context.Context, sessionID, cmdID string, stdout, stderr io.Writer, opts FollowOptions) (FollowResult, error) {
	if opts.ExitGrace < 0 {
		return FollowResult{}, fmt.Errorf("toolbox: follow logs: ExitGrace must not be negative: %w", sandbox.ErrInvalidArgument)
	}
	grace := opts.ExitGrace
	if grace == 0 {
		grace = DefaultExitGrace
	}
	return c.followLogs(ctx, sessionID, cmdID, stdout, stderr, opts.Exit, grace)
}

// exitEarly waits up to f.grace for the exit code from f.exit: when it
// comes, the whole log is read in one request and done reports that the
// follow is over. A closed channel clears f.exit: the follow then looks
// at the command itself.
func (f *follower) exitEarly(ctx context.Context) (r FollowResult, done bool, err error) {
	t := time.NewTimer(f.grace)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return FollowResult{}, true, ctx.Err()
	case <-t.C:
		return FollowResult{}, false, nil
	case code, ok := <-f.exit:
		if !ok {
			f.exit = nil
			return f.endedEarly(ctx)
		}
		f.seen = true
		r, err = f.restAndExit(ctx, code)
		return r, true, err
	}
}

// exitClosed ends a follow whose socket closed normally before the exit
// code came from f.exit: it waits for the code, then reads the log's rest
// by offset (a socket may close early). done is false when the channel
// closed without a code: then the follow looks at the command itself.
func (f *follower) exitClosed(ctx context.Context) (r FollowResult, done bool, err error) {
	code := f.learnExit(ctx)
	if ctx.Err() != nil {
		return FollowResult{}, true, ctx.Err()
	}
	if code == nil {
		return FollowResult{}, false, nil
	}
	r, err = f.restAndExit(ctx, *code)
	return r, true, err
}

// restAndExit reads the log's rest by offset (the whole log when nothing
// was read yet) and ends the follow with code.
func (f *follower) restAndExit(ctx context.Context, code int) (FollowResult, error) {
	a, err := f.fetchRest(ctx)
	if err != nil {
		return f.pollErr(ctx, err)
	}
	if err := f.feedLogs(a, true); err != nil {
		return FollowResult{}, err
	}
	return f.exited(code)
}

// learnExit waits, in exitWatch, for the code from f.exit (nil: not
// known yet, ctx ended, or the channel closed: then f.exit is cleared and
// the watch looks at the command itself).
func (f *follower) learnExit(ctx context.Context) *int {
	select {
	case <-ctx.Done():
		return nil
	case code, ok := <-f.exit:
		if !ok {
			f.exit = nil
			return nil
		}
		return &code
	}
}
