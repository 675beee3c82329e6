package toolbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// ptyOutput collects a Pty's output in the background.
type ptyOutput struct {
	ch   chan []byte
	done chan error
	buf  bytes.Buffer
}

// ptyEnv is daemonEnv for PTY tests: the login shells get a home of
// their own (no user's profile, no history written to it).
func ptyEnv(t *testing.T, mode serverMode, validate bool) *toolbox.Client {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	c, _ := daemonEnvV(t, mode, validate, toolbox.ClientOptions{})
	return c
}

func readPty(p *toolbox.Pty) *ptyOutput {
	o := &ptyOutput{ch: make(chan []byte, 64), done: make(chan error, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := p.Read(b)
			if n > 0 {
				o.ch <- bytes.Clone(b[:n])
			}
			if err != nil {
				close(o.ch)
				o.done <- err
				return
			}
		}
	}()
	return o
}

// waitFor reads until the output holds want.
func (o *ptyOutput) waitFor(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for !strings.Contains(o.buf.String(), want) {
		select {
		case b, ok := <-o.ch:
			if !ok {
				t.Fatalf("output ended before %q: %q", want, o.buf.String())
			}
			o.buf.Write(b)
		case <-timeout:
			t.Fatalf("no %q in %q", want, o.buf.String())
		}
	}
}

// end reads to the end and returns Read's last error.
func (o *ptyOutput) end(t *testing.T) error {
	t.Helper()
	for b := range o.ch {
		o.buf.Write(b)
	}
	return <-o.done
}

func TestPtyClient(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			c := ptyEnv(t, mode, true)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := c.OpenPty(ctx, toolbox.PtyCreateRequest{ID: "t", Cols: 50, Rows: 10})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			out := readPty(p)
			if _, err := io.WriteString(p, "stty size\n"); err != nil {
				t.Fatal(err)
			}
			out.waitFor(t, "10 50")
			if err := p.Resize(ctx, 77, 22); err != nil {
				t.Fatal(err)
			}
			io.WriteString(p, "stty size; exit 3\n")
			out.waitFor(t, "22 77")
			if err := out.end(t); err != io.EOF {
				t.Fatalf("Read ended with %v, want io.EOF", err)
			}
			if code, err := p.Wait(ctx); code != 3 || err != nil {
				t.Fatalf("Wait = %d, %v; want 3", code, err)
			}
			list, err := c.ListPtys(ctx)
			if err != nil || len(list) != 1 || list[0].Active {
				t.Fatalf("ListPtys = %+v, %v", list, err)
			}
			if err := c.DeletePty(ctx, "t"); err != nil {
				t.Fatal(err)
			}
			_, err = c.GetPty(ctx, "t")
			var ae *toolbox.APIError
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
				t.Fatalf("GetPty after delete: %v", err)
			}

			// A command line needs the extension.
			q, err := c.OpenPty(ctx, toolbox.PtyCreateRequest{ID: "cmd", Command: "exit 7"})
			if mode.isPlain() {
				if !errors.Is(err, errors.ErrUnsupported) {
					t.Fatalf("OpenPty with a command against Daytona: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			q.Close()
		})
	}
}

// TestPtyClientKill: Kill ends the session; Wait says 137. Connecting to
// an unknown session fails with the server's 404 (which the spec does not
// declare for connect: no validation here).
func TestPtyClientKill(t *testing.T) {
	c := ptyEnv(t, extended, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.ConnectPty(ctx, "nope")
	var ae *toolbox.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("ConnectPty of an unknown session: %v", err)
	}
	p, err := c.OpenPty(ctx, toolbox.PtyCreateRequest{ID: "k", Command: "echo ready-$((2*3)); sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out := readPty(p)
	out.waitFor(t, "ready-6")
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	out.end(t)
	if code, err := p.Wait(ctx); code != 137 || err != nil {
		t.Fatalf("Wait = %d, %v; want 137", code, err)
	}
}

// TestPtyClientCommand: with the extension, the session runs the command
// and ends with its exit code.
func TestPtyClientCommand(t *testing.T) {
	c := ptyEnv(t, extended, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := c.OpenPty(ctx, toolbox.PtyCreateRequest{ID: "c", Command: "test -t 0 && echo tty-$((3*3)); exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out := readPty(p)
	out.end(t)
	if !strings.Contains(out.buf.String(), "tty-9") {
		t.Fatalf("output %q, want tty-9", out.buf.String())
	}
	if code, err := p.Wait(ctx); code != 7 || err != nil {
		t.Fatalf("Wait = %d, %v; want 7", code, err)
	}
}
