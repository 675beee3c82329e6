package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// TestDropCapabilities: with DropCapabilities every command, session or
// one-shot, starts with empty capability sets (but for KeepCapabilities in
// the bounding, permitted and effective sets of a root command) and
// no_new_privs, while the server process keeps its own.
func TestDropCapabilities(t *testing.T) {
	testenv.NeedRoot(t, "needs root: an unprivileged process has no capabilities to drop")
	const probe = "grep -E '^(CapPrm|CapEff|CapBnd|CapInh|CapAmb|NoNewPrivs):' /proc/self/status"
	for _, keep := range [][]int{nil, {unix.CAP_SETFCAP}} {
		e := newEnv(t, true, func(o *Options) { o.DropCapabilities, o.KeepCapabilities = true, keep })
		kept := "0000000000000000"
		if keep != nil {
			kept = "0000000080000000" // 1 << CAP_SETFCAP
		}
		check := func(name, out string) {
			t.Helper()
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 6 {
				t.Fatalf("%s: unexpected status lines %q", name, out)
			}
			for _, line := range lines {
				f := strings.Fields(line)
				want := "0000000000000000"
				switch f[0] {
				case "NoNewPrivs:":
					want = "1"
				case "CapPrm:", "CapEff:", "CapBnd:":
					want = kept
				}
				if len(f) != 2 || f[1] != want {
					t.Errorf("keep %v: %s: %q, want %s", keep, name, line, want)
				}
			}
		}
		var one toolbox.ExecuteResponse
		if err := json.Unmarshal(e.expect(http.StatusOK, "POST", "/process/execute", toolbox.ExecuteRequest{Command: probe}), &one); err != nil {
			t.Fatal(err)
		}
		check("one-shot", one.Result)

		e.createSession("caps")
		r := e.execSync("caps", probe)
		if r.Stdout == nil {
			t.Fatalf("no stdout in %+v", r)
		}
		check("session", *r.Stdout)
	}

	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(own), "CapEff:\t0000000000000000") {
		t.Error("the server process itself lost its capabilities")
	}
}

// TestStartThreadSetup: the hook runs on the thread that starts every
// command, so a UTS namespace it unshares (with its own hostname) is what
// every command, session or one-shot, sees, while the rest of the process
// keeps the host's. A failing hook fails New.
func TestStartThreadSetup(t *testing.T) {
	testenv.NeedRoot(t, "needs root: unsharing a UTS namespace takes CAP_SYS_ADMIN")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	const name = "agentbox-hook-test"
	if host == name {
		t.Fatalf("host name is already %q", name)
	}
	for _, drop := range []bool{false, true} {
		e := newEnv(t, true, func(o *Options) {
			o.DropCapabilities = drop
			o.StartThreadSetup = func() error {
				if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
					return err
				}
				return unix.Sethostname([]byte(name))
			}
		})
		var one toolbox.ExecuteResponse
		if err := json.Unmarshal(e.expect(http.StatusOK, "POST", "/process/execute", toolbox.ExecuteRequest{Command: "cat /proc/sys/kernel/hostname"}), &one); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(one.Result); got != name {
			t.Errorf("drop=%v: one-shot command sees host name %q, want %q", drop, got, name)
		}
		sid := fmt.Sprintf("hook-%v", drop)
		e.createSession(sid)
		r := e.execSync(sid, "cat /proc/sys/kernel/hostname")
		if r.Stdout == nil || strings.TrimSpace(*r.Stdout) != name {
			t.Errorf("drop=%v: session command: %+v", drop, r)
		}
		if now, err := os.Hostname(); err != nil || now != host {
			t.Errorf("drop=%v: the test process's host name changed: %q %v", drop, now, err)
		}
	}

	boom := errors.New("boom")
	_, err = New(Options{WorkDir: t.TempDir(), StartThreadSetup: func() error { return boom }})
	if !errors.Is(err, boom) {
		t.Errorf("New with a failing hook: %v", err)
	}
}
