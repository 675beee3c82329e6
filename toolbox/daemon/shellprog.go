package daemon

import (
	"bytes"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The file descriptors of a ready shell's program (see readyShellProgram),
// as it starts (readyShell gives it these files with exec.Cmd.ExtraFiles).
const (
	// fdCommand is read: the mode word, under bash with the command,
	// then EOF. EOF before anything means: exit quietly.
	fdCommand = 3
	// fdState is written by the EXIT trap: the shell state the command
	// left. The program moves it out of the way of scripts that use low
	// descriptors: to fdStateBash or fdStateSh.
	fdState = 4
	// fdRestore is read by bash as it starts: first the program itself
	// (see bashBootstrap), then the length of a script restoring the
	// previous command's shell variables and functions, a newline and the
	// script.
	fdRestore = 5
	// fdStateBash is where bash keeps the state pipe while the command
	// runs.
	fdStateBash = 59
	// fdStateSh is where other shells keep it.
	fdStateSh = 9
)

// The mode words a ready shell reads on fdCommand.
const (
	// modeKeep: an EXIT trap reports the shell state on fdState.
	modeKeep = "keep"
	// modeDrop: a stateless command; no trap is set and the state pipe is
	// closed at once.
	modeDrop = "drop"
)

// The program of a ready shell under bash, one statement per line. It
// restores the previous shell variables and functions from fdRestore,
// waits on fdCommand for the command's length in bytes, a space, the mode
// word, a newline and the command, and runs the command with eval, so that
// it behaves as with `bash -c`. However the shell ends (normally, `exit`,
// `set -e`, a syntax error), the EXIT trap (mode keep) writes `pwd`, NUL,
// `export -p`, NUL, `declare -p`, NUL, `declare -f`, NUL to the state pipe.
// Every command of ours is a builtin (or `command exec`), so that restored
// user functions cannot take their place.
//
// The shell runs it as a single line (readyShellProgram joins the
// statements with "; "): bash numbers the lines of an eval'd string from
// the line the eval is on, so only an eval on line 1 (of the bootstrap's
// -c string, and of the program) gives the command's own line numbers, in
// error messages and $LINENO, as `bash -c '<command>'` has them (it
// printed "bash: line 13: cd: …" for the first line of a command).
const bashProgram = `{ IFS= builtin read -r __agentbox_n <&{fdRestore} && LC_ALL=C IFS= builtin read -r -d '' -N "$__agentbox_n" __agentbox_s <&{fdRestore} && builtin eval "$__agentbox_s"; } 2>/dev/null
command exec {fdRestore}<&- {fdStateMoved}>&{fdState} {fdState}>&-
builtin unset __agentbox_s __agentbox_n __agentbox_shell
__agentbox_exit() { __agentbox_rc=$?; builtin set +eu; { builtin printf '%s\0' "$PWD"; builtin export -p; builtin printf '\0'; builtin declare -p; builtin printf '\0'; builtin declare -f; builtin printf '\0'; } >&{fdStateMoved}; builtin exit "$__agentbox_rc"; }
IFS=' ' builtin read -r __agentbox_n __agentbox_m <&{fdCommand} || builtin exit 0
LC_ALL=C IFS= builtin read -r -d '' -N "$__agentbox_n" __agentbox_cmd <&{fdCommand}
command exec {fdCommand}<&-
case $__agentbox_m in {modeDrop}) command exec {fdStateMoved}>&- ;; *) builtin trap '{ __agentbox_exit; } 2>/dev/null' EXIT ;; esac
builtin unset __agentbox_n __agentbox_m
builtin eval "$__agentbox_cmd"`

// The program of a ready shell under other shells. It waits on fdCommand
// for the mode word and a newline, then sources the command from a file
// (the line `. <file>` that readyShell appends). The EXIT trap (mode keep)
// writes `pwd`, NUL, `env -0`, NUL: only exported variables persist.
const shProgram = `__agentbox_exit() { __agentbox_rc=$?; set +eu; { printf '%s\0' "$PWD"; command env -0 && printf '\0'; } >&{fdStateMoved}; exit "$__agentbox_rc"; }
read -r __agentbox_go <&{fdCommand} || exit 0
exec {fdCommand}<&- {fdStateMoved}>&{fdState} {fdState}>&- {fdRestore}<&-
case $__agentbox_go in
{modeDrop}) exec {fdStateMoved}>&- ;;
*) trap '{ __agentbox_exit; } 2>/dev/null' EXIT ;;
esac
unset __agentbox_go
`

// bashBootstrap returns the -c argument of a ready shell under bash, which
// reads the program (programLen bytes of ASCII) from fdRestore and runs it.
// The program does not go in argv itself: ps would show every pooled shell
// with a command line of some 700 characters, where it now shows
//
//	bash -c IFS= builtin read -rN <length> __agentbox_shell <&5; builtin eval "$__agentbox_shell"
//
// bash reads a pipe in one read(2) with -N (byte by byte with -d), so the
// indirection costs one system call. argv[0], and so $0 and the name in
// error messages, is the shell's base name, as in a user's `bash -c` (it
// was the shell's path: "/usr/bin/bash: line 13: cd: …").
func bashBootstrap(programLen int) string {
	return "IFS= builtin read -rN " + strconv.Itoa(programLen) + " __agentbox_shell <&" + strconv.Itoa(fdRestore) +
		`; builtin eval "$__agentbox_shell"`
}

// readyShellProgram returns the program a ready shell runs (with -c), with
// the descriptor numbers and mode words filled in. Subshells and background
// jobs do not inherit its EXIT trap; the exit status is preserved, and the
// trap's own commands are hidden from `set -x`.
func readyShellProgram(bash bool) string {
	prog, moved := shProgram, fdStateSh
	if bash {
		prog, moved = strings.ReplaceAll(bashProgram, "\n", "; "), fdStateBash
	}
	return strings.NewReplacer(
		"{fdCommand}", strconv.Itoa(fdCommand),
		"{fdState}", strconv.Itoa(fdState),
		"{fdRestore}", strconv.Itoa(fdRestore),
		"{fdStateMoved}", strconv.Itoa(moved),
		"{modeDrop}", modeDrop,
	).Replace(prog)
}

// shellState is what a command's EXIT trap reports and the next command
// starts with: working directory, exported environment, and (bash only) a
// script restoring shell variables and functions.
type shellState struct {
	cwd     string
	env     []string
	restore string
}

func (a shellState) equal(b shellState) bool {
	return a.cwd == b.cwd && a.restore == b.restore && slices.Equal(a.env, b.env)
}

// maxState caps the shell state a command may report.
const maxState = 16 << 20

// readState reads the state an EXIT trap writes to r, up to the sentinel
// the server writes after the shell exited: the working directory, NUL,
// then under bash `export -p`, `declare -p` and `declare -f`, each followed
// by NUL, otherwise `env -0` and one more NUL. It returns nil when the trap
// did not write a complete state (the shell was killed, say).
// sandboxState turns the cwd of a state a shell reported, a name on the
// server's own file system, into the sandbox's name of it (the same with
// the root "/"); a cwd outside the root is left as it is, which resolves
// to nothing inside the root, so the next shell starts in the work dir.
// The next shell's cwd is resolved inside the root (startCommand), never
// followed as a string.
func (s *Server) sandboxState(st *shellState) *shellState {
	if st != nil {
		if p, ok := s.root.sandboxPath(st.cwd); ok {
			st.cwd = p
		}
	}
	return st
}

func readState(r io.Reader, bash bool, sentinel []byte) *shellState {
	var b []byte
	buf := make([]byte, 16<<10)
	for {
		if i := bytes.Index(b, sentinel); i >= 0 {
			b = b[:i]
			break
		}
		n, err := r.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil || len(b) > maxState {
			return nil
		}
	}
	cwd, rest, ok := bytes.Cut(b, []byte{0})
	if !ok || !filepath.IsAbs(string(cwd)) {
		return nil
	}
	var env []string
	restore := ""
	if bash {
		parts := bytes.Split(rest, []byte{0})
		if len(parts) != 4 || len(parts[3]) != 0 {
			return nil
		}
		var err error
		if env, err = parseExportP(parts[0]); err != nil {
			return nil
		}
		restore = restoreScript(parts[1], parts[2])
	} else {
		if !bytes.HasSuffix(rest, []byte{0, 0}) && !bytes.Equal(rest, []byte{0}) {
			return nil
		}
		for _, f := range bytes.Split(bytes.TrimRight(rest, "\x00"), []byte{0}) {
			if len(f) > 0 {
				env = append(env, string(f))
			}
		}
	}
	return &shellState{cwd: string(cwd), env: normalizeEnv(env), restore: restore}
}

// normalizeEnv returns env sorted, without malformed entries and without
// the variables a shell sets for itself (PWD, SHLVL, _) or the marker.
func normalizeEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		switch k {
		case "PWD", "SHLVL", "_", markerKey:
			continue
		}
		out = append(out, kv)
	}
	sort.Strings(out)
	return slices.Compact(out)
}
