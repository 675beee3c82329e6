//go:build unix

package cli

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

// fdTerminal is a terminal open on a file descriptor.
type fdTerminal struct{ fd int }

// openTerminal returns the terminal in is, or a usage error when in is not
// a terminal.
func openTerminal(in io.Reader) (terminal, error) {
	f, ok := in.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, usagef("agentbox shell needs a terminal on standard input; to run a script, use 'agentbox exec -i < script' (or 'agentbox exec -- COMMAND')")
	}
	return fdTerminal{fd: int(f.Fd())}, nil
}

func (t fdTerminal) Size() (int, int, error) { return term.GetSize(t.fd) }

func (t fdTerminal) MakeRaw() (func(), error) {
	st, err := term.MakeRaw(t.fd)
	if err != nil {
		return nil, err
	}
	return func() { _ = term.Restore(t.fd, st) }, nil
}

func (t fdTerminal) Resized() (<-chan struct{}, func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGWINCH)
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-sigs:
				select {
				case ch <- struct{}{}:
				default: // one pending notice is enough
				}
			case <-done:
				return
			}
		}
	}()
	return ch, func() {
		signal.Stop(sigs)
		close(done)
		<-ended
	}
}
