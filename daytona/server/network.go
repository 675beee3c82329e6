package server

import (
	"context"
	"net/http"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The network view (issue 30): GET /api/sandbox/{id}/network answers a
// networkView, the sandbox's policy as Daytona's fields write it and, for
// a started (or paused) sandbox, the engine's view of it: the mode in
// force, the refusal counters and the policy log of its egress proxy.

// getNetworkView answers GET /api/sandbox/{id}/network.
func (s *Server) getNetworkView(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	var v networkView
	var id string
	var live bool
	if err == nil {
		id = rec.id
		v = networkView{
			NetworkBlockAll:  rec.network.Mode == sandbox.NetworkBlocked,
			NetworkAllowList: rec.network.AllowListString(),
			DomainAllowList:  rec.network.DomainAllowListString(),
		}
		live = rec.state == stateStarted || rec.state == statePaused
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if live {
		info, err := s.eng.networkInfo(r.Context(), id)
		switch {
		case errNotFound(err):
			// Deleted meanwhile: as if not started.
		case err != nil:
			return &httpError{Status: http.StatusBadGateway, Message: "the sandbox's engine could not tell its network", Err: err}
		default:
			v.Info = info
		}
	}
	writeJSON(w, v)
	return nil
}

// networkInfo returns what package local's Info tells of sandbox id's
// network.
func (e localEngine) networkInfo(ctx context.Context, id string) (*sandbox.NetworkInfo, error) {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return nil, err
	}
	info, err := sb.Info(ctx)
	if err != nil {
		return nil, err
	}
	return info.Network, nil
}
