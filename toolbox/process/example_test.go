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

// serve serves a toolbox daemon on a unix socket, as a local sandbox's
// init does, and returns a client of it and a function ending it all.
func serve() (*toolbox.Client, func()) {
	dir, _ := os.MkdirTemp("", "example-")
	srv, err := daemon.New(daemon.Options{WorkDir: dir})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "toolbox.sock"))
	if err != nil {
		panic(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	client, err := toolbox.NewClient(toolbox.ClientOptions{Socket: filepath.Join(dir, "toolbox.sock")})
	if err != nil {
		panic(err)
	}
	return client, func() {
		client.Close()
		hs.Close()
		srv.Close()
		os.RemoveAll(dir)
	}
}

// This example runs commands through a Manager.
func ExampleManager_Execute() {
	client, stop := serve()
	defer stop()
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

// This example starts a background process through one Manager, which
// detaches and leaves it running, as a command-line tool that exits does;
// another Manager of the sandbox (in another process, typically) finds it
// by its id and talks to it.
func ExampleManager_Detach() {
	client, stop := serve()
	defer stop()
	ctx := context.Background()

	first := process.NewManager(process.Options{Client: client})
	p, err := first.Spawn(ctx, `read name; echo "hello $name"`, &sandbox.ExecOptions{Timeout: -1})
	if err != nil {
		panic(err)
	}
	first.Detach(ctx)

	second := process.NewManager(process.Options{Client: client})
	defer second.Close(ctx)
	list, _ := second.List(ctx)
	fmt.Printf("%s %q running=%v\n", list[0].PID, list[0].Command, list[0].Running)
	q, err := second.Get(ctx, p.PID())
	if err != nil {
		panic(err)
	}
	q.SendStdin(ctx, []byte("world\n"))
	r, _ := q.Wait(ctx)
	fmt.Print(r.Stdout)
	// Output:
	// 1 "read name; echo \"hello $name\"" running=true
	// hello world
}
