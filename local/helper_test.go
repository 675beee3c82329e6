//go:build linux

package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Helper processes: the test binary re-executed with helperEnv set plays a
// second program that uses the same state dir.
const helperEnv = "AGENTBOX_LOCAL_TEST_HELPER"

// helperMain runs a helper mode and reports its exit code, or returns false
// when this process is not a helper.
func helperMain() (int, bool) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return 0, false
	}
	ctx := context.Background()
	switch mode {
	case "rootless-net":
		return rootlessNetHelper(ctx), true
	case "rootless-bench":
		return rootlessBenchHelper(ctx), true
	}
	var cfg local.Config
	var err error
	if cfg.Network, err = sandbox.ParseNetworkPolicy(os.Getenv("HELPER_BLOCK_NETWORK") != "", "", os.Getenv("HELPER_DOMAINS")); err != nil {
		fmt.Println("error:", err)
		return 1, true
	}
	sb, err := local.New(local.Options{ID: os.Getenv("HELPER_ID"), StateDir: os.Getenv("HELPER_STATE_DIR"), Config: cfg})
	if err != nil {
		fmt.Println("error:", err)
		return 1, true
	}
	if len(cfg.Network.Domains) > 0 {
		local.SetEgressTestHooks(sb, testHosts, true)
	}
	// Wait for the go signal on stdin so that concurrent helpers start
	// together.
	if os.Getenv("HELPER_WAIT") != "" {
		bufio.NewReader(os.Stdin).ReadString('\n')
	}
	if os.Getenv("HELPER_NO_USERNS") != "" {
		// Forbid user namespaces below ours (we run as root of a user
		// namespace the test made, so this touches nothing else).
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
			fmt.Println("setup:", err)
			return 1, true
		}
	}
	outcome, err := sb.Start(ctx)
	if err != nil {
		fmt.Println("error:", err)
		if errors.Is(err, sandbox.ErrIsolationUnavailable) {
			fmt.Println("isolation unavailable")
		}
		return 1, true
	}
	switch mode {
	case "start":
		r, err := sb.ExecuteCommand(ctx, "echo hello", nil, nil)
		if err != nil || r.Stdout != "hello\n" {
			fmt.Println("error: command:", err)
			return 1, true
		}
		fmt.Println("outcome", outcome)
		return 0, true
	case "unprivileged":
		r, err := sb.ExecuteCommand(ctx, "id -u; cat /proc/1/cmdline | tr '\\0' ' '; echo; hostname; cat /proc/self/uid_map; echo x > ~/owned; echo y > /usr/x 2>/dev/null || echo ro; cat /proc/net/dev", nil, nil)
		if err != nil {
			fmt.Println("error: command:", err)
			return 1, true
		}
		fmt.Printf("%q\n", r.Stdout)
		info, err := sb.Info(ctx)
		if err != nil {
			fmt.Println("error: info:", err)
			return 1, true
		}
		fmt.Printf("mode %s\nnote %s\n", info.Network.Mode, info.Network.Note)
		if err := sb.Destroy(ctx); err != nil {
			fmt.Println("error: destroy:", err)
			return 1, true
		}
		return 0, true
	case "hold":
		r, err := sb.ExecuteCommand(ctx, "echo precious > ~/data.txt && echo temp > /tmp/state.txt", nil, nil)
		if err != nil || r.ExitCode != 0 {
			fmt.Println("error: command:", err, r)
			return 1, true
		}
		p, err := sb.Processes().Spawn(ctx, "echo started && exec sleep 3031", nil)
		if err != nil {
			fmt.Println("error: spawn:", err)
			return 1, true
		}
		// Report ready only once the process really runs: Spawn returns
		// when the command is accepted, before its shell has started it.
		if !poll(10*time.Second, func() bool { return p.Stdout() == "started\n" }) {
			fmt.Println("error: spawned process did not start:", p.Stdout())
			return 1, true
		}
		fmt.Println("ready", outcome, p.PID())
		select {} // until killed
	}
	fmt.Println("error: unknown helper mode", mode)
	return 2, true
}

// startHelper starts a helper process in mode for the sandbox id.
func startHelper(t *testing.T, mode, stateDir, id string, wait bool) (*exec.Cmd, *bufio.Reader, func() error) {
	t.Helper()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "HELPER_ID="+id, "HELPER_STATE_DIR="+stateDir)
	if wait {
		cmd.Env = append(cmd.Env, "HELPER_WAIT=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, bufio.NewReader(out), func() error {
		_, err := stdin.Write([]byte("go\n"))
		stdin.Close()
		return err
	}
}

// readLine reads one line from a helper, failing after a while.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		ch <- strings.TrimSpace(s)
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("helper said nothing for 30s")
		return ""
	}
}

// stopByID stops the sandbox id of stateDir through a handle from
// local.Open, as agentbox sandbox stop does.
func stopByID(ctx context.Context, stateDir, id string) error {
	sb, err := local.Open(ctx, stateDir, id)
	if err != nil {
		return err
	}
	return sb.Stop(ctx)
}

// opened returns a second handle of the sandbox id of stateDir, from
// local.Open.
func opened(t testing.TB, stateDir, id string) *local.Sandbox {
	t.Helper()
	sb, err := local.Open(context.Background(), stateDir, id)
	if err != nil {
		t.Fatalf("Open %s: %v", id, err)
	}
	return sb
}
