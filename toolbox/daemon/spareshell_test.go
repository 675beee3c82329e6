package daemon

import (
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// spareShellPID waits for the spare shell of e's server to start and
// returns its pid.
func spareShellPID(t *testing.T, e *testEnv) int {
	t.Helper()
	e.srv.mu.Lock()
	sp := e.srv.spare
	e.srv.mu.Unlock()
	if sp == nil {
		t.Fatal("the server started no spare shell")
	}
	<-sp.done
	if sp.rs == nil {
		t.Fatal("the spare shell did not start")
	}
	return sp.rs.cmd.Process.Pid
}

// shellPID runs `echo $$` in session sid: the pid of the shell that ran it.
func shellPID(t *testing.T, e *testEnv, sid string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(*e.execSync(sid, "echo $$").Stdout))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// The first session's first command runs in the shell the server started
// with itself; the second session readies its own.
func TestSpareShellServesFirstSession(t *testing.T) {
	e := newEnv(t, true)
	spare := spareShellPID(t, e)
	e.createSession("first")
	if got := shellPID(t, e, "first"); got != spare {
		t.Errorf("first command ran in shell %d, want the spare shell %d", got, spare)
	}
	e.createSession("second")
	if got := shellPID(t, e, "second"); got == spare {
		t.Errorf("second session reused the spare shell %d", got)
	}
}

// A spare shell started before POST /env changed the environment is not
// used: the first session sees the new environment, and the spare shell
// is gone.
func TestSpareShellDismissedAfterEnvChange(t *testing.T) {
	e := newEnv(t, true, func(o *Options) { o.Env = append(o.Env, "OLD=old") })
	spare := spareShellPID(t, e)
	e.updateEnv(toolbox.UpdateEnvRequest{Set: map[string]string{"NEW": "new"}, Unset: []string{"OLD"}})
	e.createSession("s")
	if got := strings.TrimSpace(*e.execSync("s", `echo "${NEW-unset} ${OLD-unset}"`).Stdout); got != "new unset" {
		t.Errorf("first session saw %q, want the changed environment %q", got, "new unset")
	}
	if pidAlive(spare) {
		t.Errorf("the spare shell %d still runs after it was dismissed", spare)
	}
}

// Close ends a spare shell no session took.
func TestSpareShellEndsWithServer(t *testing.T) {
	e := newEnv(t, false)
	spare := spareShellPID(t, e)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if pidAlive(spare) {
		t.Errorf("the spare shell %d outlived Close", spare)
	}
}
