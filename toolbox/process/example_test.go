package process_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
	"github.com/agentbox-dev/agentbox/toolbox/process"
)

// This example serves a toolbox daemon on a unix socket, as a local
// sandbox's init does, and runs commands through a Manager.
func ExampleManager_Execute() {
	dir, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(dir)
	srv, err := daemon.New(daemon.Options{WorkDir: dir})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ln, err := net.Listen("unix", filepath.Join(dir, "toolbox.sock"))
	if err != nil {
		panic(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	defer hs.Close()

	client, err := toolbox.NewClient(toolbox.ClientOptions{Socket: filepath.Join(dir, "toolbox.sock")})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	m := process.NewManager(process.Options{Client: client})
	ctx := context.Background()
	defer m.Close(ctx)

	r, err := m.Execute(ctx, "printf '%s\\n'", []string{"hello world", "it's"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s(exit %d)\n", r.Stdout, r.ExitCode)

	r, _ = m.Execute(ctx, "echo $GREETING >&2; exit 3", nil, &sandbox.ExecOptions{Env: map[string]string{"GREETING": "hi"}})
	fmt.Printf("stderr %q, exit %d\n", r.Stderr, r.ExitCode)
	// Output:
	// hello world
	// it's
	// (exit 0)
	// stderr "hi\n", exit 3
}
