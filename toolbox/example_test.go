package toolbox_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
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
// end of the stream when the server offers the frames extension.
func ExampleClient_FollowLogs() {
	ctx := context.Background()
	c, err := toolbox.NewClient(toolbox.ClientOptions{Socket: "/run/agentbox/toolbox.sock"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateSession(ctx, "build"); err != nil {
		log.Fatal(err)
	}
	r, err := c.SessionExecute(ctx, "build", toolbox.SessionExecuteRequest{Command: "make test", RunAsync: true})
	if err != nil {
		log.Fatal(err)
	}
	fr, err := c.FollowLogs(ctx, "build", r.CmdID, os.Stdout, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	code := fr.ExitCode
	if code == nil && !fr.Killed {
		cmd, err := c.GetCommand(ctx, "build", r.CmdID)
		if err != nil {
			log.Fatal(err)
		}
		code = cmd.ExitCode
	}
	fmt.Println("exit code", *code, "killed", fr.Killed)
}
