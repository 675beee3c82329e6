package process

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// The test binary runs as a helper process, a client of another test's
// daemon, when envHelper is set (see TestMain).
const (
	envHelper  = "AGENTBOX_PROCESS_TEST_HELPER" // what to do: "exec"
	envSocket  = "AGENTBOX_PROCESS_TEST_SOCKET" // the daemon's socket
	envCommand = "AGENTBOX_PROCESS_TEST_COMMAND"
	envStream  = "AGENTBOX_PROCESS_TEST_STREAM" // "1": with a Stdout writer
)

// runHelper runs the helper named by envHelper and returns its exit code.
func runHelper() int {
	switch os.Getenv(envHelper) {
	case "exec":
		// Run one command through a Manager of our own, as `agentbox
		// exec` does, until the test kills us.
		client, err := toolbox.NewClient(toolbox.ClientOptions{Socket: os.Getenv(envSocket)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		m := NewManager(Options{Client: client})
		opts := &sandbox.ExecOptions{}
		if os.Getenv(envStream) == "1" {
			opts.Stdout = io.Discard
		}
		r, err := m.Execute(context.Background(), os.Getenv(envCommand), nil, opts)
		fmt.Println(r, err)
		return 0
	case "daemon":
		return runDaemonHelper()
	case "rss":
		return runRSSHelper()
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", os.Getenv(envHelper))
	return 2
}

// startHelper starts the test binary as helper name against h's daemon.
func startHelper(t *testing.T, h *harness, name string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envHelper + "=" + name, envSocket + "=" + h.sock}, env...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// A command dies with the client that runs it, as with ssh or os/exec:
// a client process killed with SIGKILL (no chance to clean up) does not
// leave its command running unseen in a pooled session (the tether
// extension). Both paths: a sync exec, and an async exec with a follower.
func TestExecuteDiesWithClient(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			pidFile := filepath.Join(h.dir, "pid")
			stream := "0"
			if streaming {
				stream = "1"
			}
			client := startHelper(t, h, "exec",
				envCommand+"=sleep 60 & echo $! > "+pidFile+"; wait", envStream+"="+stream)
			pid := readPID(t, pidFile)
			if err := client.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			client.Wait()
			waitGone(t, pid)
		})
	}
}
