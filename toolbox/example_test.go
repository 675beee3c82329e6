package toolbox_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// A Daytona command log marks each chunk with its stream; the markers may be
// split across writes (here, WebSocket frames) anywhere.
func ExampleNewDemuxer() {
	var stdout, stderr strings.Builder
	d := toolbox.NewDemuxer(&stdout, &stderr)
	frames := []string{"\x01\x01\x01hello\n\x02", "\x02\x02oops\n\x01\x01", "\x01bye\n"}
	for _, f := range frames {
		if _, err := d.Write([]byte(f)); err != nil {
			log.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("stdout %q\nstderr %q\n", stdout.String(), stderr.String())
	// Output:
	// stdout "hello\nbye\n"
	// stderr "oops\n"
}

// Run a command in a session and stream its output as it comes: one request
// to start it, one WebSocket to follow it; the exit code arrives with the
// end of the stream when the server offers the frames extension. Here the
// server is agentbox's own toolbox server, served over HTTP on loopback; in
// a local sandbox it listens on a unix socket (ClientOptions.Socket).
func ExampleClient_FollowLogs() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := daemon.New(daemon.Options{WorkDir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: hs.URL})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateSession(ctx, "build"); err != nil {
		log.Fatal(err)
	}
	r, err := c.SessionExecute(ctx, "build", toolbox.SessionExecuteRequest{Command: "echo compiling; echo 'warning: unused' >&2; exit 2", RunAsync: true})
	if err != nil {
		log.Fatal(err)
	}
	var stderr strings.Builder
	fr, err := c.FollowLogs(ctx, "build", r.CmdID, os.Stdout, &stderr)
	if err != nil {
		log.Fatal(err)
	}
	code := fr.ExitCode
	if code == nil && !fr.Killed {
		// A plain Daytona daemon does not send the exit code with the end
		// of the stream: ask for it.
		cmd, err := c.GetCommand(ctx, "build", r.CmdID)
		if err != nil {
			log.Fatal(err)
		}
		code = cmd.ExitCode
	}
	fmt.Printf("stderr %q, exit code %d, killed %v\n", stderr.String(), *code, fr.Killed)
	// Output:
	// compiling
	// stderr "warning: unused\n", exit code 2, killed false
}
