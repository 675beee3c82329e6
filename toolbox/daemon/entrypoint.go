package daemon

import (
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// The entrypoint: the command an engine gives the sandbox to run from the
// start (Options.Entrypoint, an image's entrypoint), kept as Daytona keeps
// it: command "entrypoint_command" of session "entrypoint". The session is
// not among the others: it is not listed, and a client can neither create,
// delete nor exec in it.

// entrypointCommand is the id of the entrypoint's command.
const entrypointCommand = "entrypoint_command"

func (s *Server) entrypointRoutes() []route {
	return []route{
		{"GET /process/session/" + reservedSession, s.handleEntrypointSession},
		{"GET /process/session/" + reservedSession + "/logs", s.handleEntrypointLogs},
	}
}

// startEntrypoint runs argv, shell-quoted, as the entrypoint (New).
func (s *Server) startEntrypoint(argv []string) error {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = sandbox.ShellQuote(a)
	}
	ss, err := s.newSession(reservedSession)
	if err != nil {
		return err
	}
	if _, err := ss.startID(entrypointCommand, toolbox.SessionExecuteRequest{Command: strings.Join(quoted, " "), RunAsync: true}, false, false); err != nil {
		ss.destroy()
		return err
	}
	s.entry = ss
	return nil
}

// entrypoint returns the entrypoint's session and command, or the 404 of
// a server started without one.
func (s *Server) entrypoint() (*session, *command, error) {
	if s.entry == nil {
		return nil, nil, notFound("this sandbox has no entrypoint: its toolbox server was started without one (daemon.Options.Entrypoint)")
	}
	c, err := s.entry.command(entrypointCommand)
	if err != nil {
		return nil, nil, err
	}
	return s.entry, c, nil
}

func (s *Server) handleEntrypointSession(w http.ResponseWriter, r *http.Request) error {
	ss, _, err := s.entrypoint()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ss.info())
	return nil
}

func (s *Server) handleEntrypointLogs(w http.ResponseWriter, r *http.Request) error {
	ss, c, err := s.entrypoint()
	if err != nil {
		return err
	}
	return s.serveLogs(w, r, ss, c)
}

// closeEntrypoint kills the entrypoint (Close).
func (s *Server) closeEntrypoint() {
	if s.entry != nil {
		s.entry.destroy()
	}
}
