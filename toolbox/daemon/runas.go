package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// Commands may run as a user other than the server's (Options.Credential:
// an image's USER). The server then acts on files as that user wherever a
// command would see the difference, as Daytona's daemon does by running as
// its sandbox's user: the file and git routes run with the user's file
// system ids on their OS thread (so what they make is the user's, and they
// reach only what the user may), and so do the folders and scripts the
// server writes for commands to read.

// startCommand starts cmd as the user commands run as, from the starter's
// thread (see starter). cmd.Dir, when set, is a folder as the sandbox sees
// it: it is resolved inside the server's root to a descriptor first, and
// the child starts in that very folder (commandDir), whatever links the
// sandbox plants meanwhile; a folder that cannot be resolved so fails the
// start (see cwdError).
func (s *Server) startCommand(cmd *exec.Cmd) error {
	if cmd.Dir != "" {
		d, err := s.root.openDirFor(cmd.Dir)
		if err != nil {
			return cwdError(cmd.Dir, err)
		}
		defer d.Close() // the child has chdir'ed once Start returns
		cmd.Dir = commandDir(d)
	}
	if s.cred != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		if cmd.SysProcAttr.Credential == nil {
			c := *s.cred
			cmd.SysProcAttr.Credential = &c
		}
	}
	return s.starter.start(cmd)
}

// cwdError says why the working directory dir cannot be used.
func cwdError(dir string, err error) error {
	var he *httpError
	if errors.As(fsError(dir, err), &he) && he.status < 500 {
		return badRequest("cwd %q cannot be used: %s", dir, he.msg)
	}
	return fmt.Errorf("cwd %q: %w", dir, err)
}

// checkCwd answers 400 naming the working directory dir when it is no
// folder inside the server's root.
func (s *Server) checkCwd(dir string) error {
	fi, err := s.root.stat(dir)
	if err != nil {
		return cwdError(dir, err)
	}
	if !fi.IsDir() {
		return badRequest("cwd %q is not a directory in the sandbox", dir)
	}
	return nil
}

// runsAsOther reports whether commands run as another user than the
// server, whose files the server must make theirs.
func (s *Server) runsAsOther() bool {
	return s.cred != nil && (int(s.cred.Uid) != os.Geteuid() || int(s.cred.Gid) != os.Getegid())
}

// asUser runs f with the file system ids of the user commands run as, on
// a thread of its own; f must not hand its work to other goroutines. Calls
// nest.
func (s *Server) asUser(f func() error) error {
	if !s.runsAsOther() {
		return f()
	}
	uid, gid := int(s.cred.Uid), int(s.cred.Gid)
	runtime.LockOSThread()
	if u, g := fsIDs(); u == uid && g == gid { // nested
		defer runtime.UnlockOSThread()
		return f()
	}
	if err := setFSIDs(uid, gid); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("daemon: taking the ids of uid %d: %w", uid, err)
	}
	defer func() {
		// A thread that cannot get its ids back stays locked: the
		// runtime ends it with its goroutine rather than reuse it.
		if setFSIDs(os.Geteuid(), os.Getegid()) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return f()
}

// asUserRoutes makes every route of table run as the user commands run as.
func (s *Server) asUserRoutes(table []route) []route {
	if !s.runsAsOther() {
		return table
	}
	out := make([]route, len(table))
	for i, rt := range table {
		h := rt.h
		out[i] = route{rt.pattern, func(w http.ResponseWriter, r *http.Request) error {
			return s.asUser(func() error { return h(w, r) })
		}}
	}
	return out
}

// makeTmpDir makes the folder of the server's files for commands (session
// folders, scripts), the user's that commands run as.
func (s *Server) makeTmpDir() (string, error) {
	dir, err := os.MkdirTemp("", "agentbox-toolbox-")
	if err != nil || !s.runsAsOther() {
		return dir, err
	}
	if err := os.Lchown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
}
