package unisolated_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/internal/unisolated"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newSandbox returns an unisolated sandbox whose every request and response,
// on both the server and the client side, is validated against Daytona's
// spec files.
func newSandbox(t *testing.T, opts unisolated.Options) *unisolated.Sandbox {
	t.Helper()
	v := spectest.Load(t)
	opts.WrapHandler = func(h http.Handler) http.Handler { return v.Handler(t, h) }
	opts.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return v.Transport(t, rt) }
	sb, err := unisolated.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		return newSandbox(t, unisolated.Options{})
	}, sandboxtest.Options{PersistentFiles: true, Reopen: reopen})
}

// The polling fallback of log following must pass the suite too.
func TestConformancePolling(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		return newSandbox(t, unisolated.Options{DisableWebSocket: true})
	}, sandboxtest.Options{PersistentFiles: true, Reopen: reopen})
}

// reopen is the suite's Reopen: a second handle on the daemon of sb.
func reopen(sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	return sb.(*unisolated.Sandbox).Reopen()
}

func TestIdentity(t *testing.T) {
	sb := newSandbox(t, unisolated.Options{ID: "fixed-id"})
	defer sb.Destroy(context.Background())
	if sb.ID() != "fixed-id" || sb.Name() != "UnisolatedSandbox" || sb.Provider() != "unisolated" {
		t.Fatalf("ID %q Name %q Provider %q", sb.ID(), sb.Name(), sb.Provider())
	}
}

func TestDestroyRemovesFolder(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, unisolated.Options{})
	if sb.Dir() != "" {
		t.Fatalf("folder %s exists before the first start", sb.Dir())
	}
	r, err := sb.ExecuteCommand(ctx, "pwd", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != sb.WorkDir()+"\n" {
		t.Fatalf("default cwd %q, want %q", r.Stdout, sb.WorkDir())
	}
	dir := sb.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("folder %s after Destroy: %v", dir, err)
	}
}

// Concurrent starts share one attempt: the daemon is started, and the
// OnStart hook runs, once.
func TestConcurrentStartOneAttempt(t *testing.T) {
	ctx := context.Background()
	var starts atomic.Int32
	sb := newSandbox(t, unisolated.Options{Hooks: sandbox.Hooks{
		OnStart: func(ctx context.Context, id string, o sandbox.Outcome) error {
			starts.Add(1)
			time.Sleep(20 * time.Millisecond) // widen the window for joiners
			return nil
		},
	}})
	defer sb.Destroy(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := sb.Start(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := starts.Load(); n != 1 {
		t.Fatalf("OnStart ran %d times for 8 concurrent starts, want 1", n)
	}
}

// A command that runs while its sandbox is stopped or destroyed fails with
// an error matching sandbox.ErrNotReady (and sandbox.ErrDestroyed when
// destroyed), whether it streams or not; the traffic stays within
// Daytona's specs meanwhile.
func TestCommandDuringStop(t *testing.T) {
	for _, destroy := range []bool{false, true} {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("destroy=%v/streaming=%v", destroy, streaming), func(t *testing.T) {
				ctx := context.Background()
				sb := newSandbox(t, unisolated.Options{})
				defer sb.Destroy(ctx)
				if _, err := sb.Start(ctx); err != nil {
					t.Fatal(err)
				}
				opts := &sandbox.ExecOptions{}
				if streaming {
					opts.Stdout = io.Discard
				}
				done := make(chan error, 1)
				go func() {
					r, err := sb.ExecuteCommand(ctx, "touch started; sleep 30", nil, opts)
					if err == nil {
						err = fmt.Errorf("no error; result %+v", r)
					}
					done <- err
				}()
				started := filepath.Join(sb.WorkDir(), "started")
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					if _, err := os.Stat(started); err == nil {
						break
					} else if time.Now().After(deadline) {
						t.Fatal("the command did not start")
					}
				}
				stop := sb.Stop
				if destroy {
					stop = sb.Destroy
				}
				if err := stop(ctx); err != nil {
					t.Fatal(err)
				}
				err := <-done
				if !errors.Is(err, sandbox.ErrNotReady) || errors.Is(err, sandbox.ErrDestroyed) != destroy {
					t.Fatalf("ExecuteCommand: %v; want an error matching ErrNotReady (and ErrDestroyed: %v)", err, destroy)
				}
			})
		}
	}
}
