package landlock

import (
	"errors"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRestrictThreadScopes restricts a thread of its own (left locked, so
// that the runtime discards it) and checks that, where the kernel scopes
// signals, the thread can no longer signal a process started outside its
// domain, while the test's other threads still can.
func TestRestrictThreadScopes(t *testing.T) {
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Process.Kill(); outside.Wait() })
	type result struct {
		restricted bool
		err, kill  error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ok, err := RestrictThreadScopes()
		done <- result{ok, err, unix.Kill(outside.Process.Pid, 0)}
	}()
	r := <-done
	if r.err != nil {
		t.Fatalf("RestrictThreadScopes: %v", r.err)
	}
	abi := ABI()
	if r.restricted != (abi >= ScopeABI) {
		t.Fatalf("RestrictThreadScopes restricted = %v with ABI %d (scoping from %d)", r.restricted, abi, ScopeABI)
	}
	if r.restricted && !errors.Is(r.kill, unix.EPERM) {
		t.Errorf("a scoped thread signalled a process outside its domain: %v, want EPERM", r.kill)
	}
	if !r.restricted && r.kill != nil {
		t.Errorf("an unscoped thread could not signal a child: %v", r.kill)
	}
	if err := unix.Kill(outside.Process.Pid, 0); err != nil {
		t.Errorf("an unrestricted thread could not signal a child: %v", err)
	}
}
