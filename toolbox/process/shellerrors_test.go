package process

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Shell errors read as the user's own command gives them in `bash -c`: the
// daemon's wrapping (a ready shell's program, the process manager's eval)
// does not show. They used to carry the wrapper's line and the shell's
// path ("/usr/bin/bash: line 13: cd: /nonexistent: …"). The reference is
// what this machine's bash prints (bash 5.1 and later say "line 1: " for
// a -c string; older ones say nothing), for ExecuteCommand and Spawn, with
// the agentbox toolbox server. Against a plain Daytona daemon the command
// goes through eval in a subshell, whose quoted argument bash numbers from
// its last line: there only commands of one line read exactly so.
func TestShellErrorsReadAsBashC(t *testing.T) {
	testenv.NeedTool(t, "bash", "bash")
	commands := []string{
		"cd /nonexistent",
		"nosuchbinary",
		"echo x | nosuchbinary2",
		"true\nnosuch3\ncd /nonexistent/2",
		"echo \"line $LINENO of $0\" >&2",
		"printf 'a\\nb\\n' | while read -r l; do\n  nosuch4 \"$l\"\ndone",
	}
	for _, sm := range serverModes {
		t.Run(sm.name, func(t *testing.T) {
			plain := sm.plain
			h := newHarness(t, sm.with(harnessOptions{}))
			ctx := context.Background()
			for _, c := range commands {
				if plain && strings.Contains(c, "\n") {
					continue
				}
				ref := exec.Command("bash", "-c", c)
				ref.Env, ref.Dir = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + h.dir, "LANG=C.UTF-8"}, h.dir // as the harness's daemon
				want, _ := ref.CombinedOutput()
				r := h.exec(t, c, nil, nil)
				if r.Stderr != string(want) {
					t.Errorf("ExecuteCommand(%q): stderr %q, want %q (as bash -c)", c, r.Stderr, want)
				}
				var out syncBuffer
				r = h.exec(t, c, nil, &sandbox.ExecOptions{Stderr: &out})
				if r.Stderr != string(want) || out.String() != string(want) {
					t.Errorf("ExecuteCommand(%q) streaming: stderr %q, written %q, want %q (as bash -c)", c, r.Stderr, out.String(), want)
				}
				p, err := h.m.Spawn(ctx, c, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r := wait(t, p); r.Stderr != string(want) {
					t.Errorf("Spawn(%q): stderr %q, want %q (as bash -c)", c, r.Stderr, want)
				}
			}
		})
	}
}
