package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Sandboxes' secrets. A sandbox's record keeps the secrets it holds by
// name (secretRef: an environment variable and a secret of its
// organization), never their values: those are resolved from the secrets
// whenever they are handed to the engine — at create (spec.secrets, the
// local engine's Config.Secrets), after every start, resume or fork
// (secretApplier), when PUT /sandbox/{id}/secrets replaces the set of a
// started sandbox, when PATCH /secret/{id} changes a value or hosts (the
// started sandboxes that hold it), and once when a server starts (the
// started sandboxes that hold any). A warm pool's spare holds none, so a
// create with secrets never takes one.

// maxSandboxSecrets is the most secrets a sandbox holds.
const maxSandboxSecrets = 100

// secretsEngine is the part of an engine that gives sandboxes secrets.
type secretsEngine interface {
	// setSecrets replaces the secrets of sandbox id: commands started
	// after it see the new placeholders, and its egress proxy
	// substitutes the new values.
	setSecrets(ctx context.Context, id string, secrets []sandbox.Secret) error
}

func (e localEngine) setSecrets(ctx context.Context, id string, secrets []sandbox.Secret) error {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return err
	}
	return sb.SetSecrets(ctx, secrets)
}

// holdsSecret reports whether rec holds the secret named name.
func (rec *record) holdsSecret(name string) bool {
	return slices.ContainsFunc(rec.secrets, func(ref secretRef) bool { return ref.Name == name })
}

// parseSecretRefs reads the wire's secrets, an array of {ENV: name}
// objects, sorted by variable: each variable an environment variable
// name, given once.
func parseSecretRefs(wire []map[string]string) ([]secretRef, error) {
	var refs []secretRef
	for _, m := range wire {
		for env, name := range m {
			// The variable's rules are sandbox.Secret's Name's.
			if err := (sandbox.Secret{Name: env, Value: "x", Hosts: []string{"example.com"}}).Validate(); err != nil {
				return nil, &httpError{Status: http.StatusBadRequest, Message: "secrets: " + err.Error(), Err: err}
			}
			if name == "" {
				return nil, errorf(http.StatusBadRequest, "secrets: %s names no secret: give the name of a secret of the organization", env)
			}
			refs = append(refs, secretRef{Env: env, Name: name})
		}
	}
	slices.SortFunc(refs, func(a, b secretRef) int { return strings.Compare(a.Env, b.Env) })
	for i := 1; i < len(refs); i++ {
		if refs[i].Env == refs[i-1].Env {
			return nil, errorf(http.StatusBadRequest, "secrets: %s is given twice: each environment variable holds one secret", refs[i].Env)
		}
	}
	if len(refs) > maxSandboxSecrets {
		return nil, errorf(http.StatusBadRequest, "secrets: %d, more than the %d a sandbox may hold", len(refs), maxSandboxSecrets)
	}
	return refs, nil
}

// attachSecrets gives rec, a new sandbox, the secrets the create's wire
// names, and sp their values; a name the organization has no secret of
// is a 400 naming it.
func (s *Server) attachSecrets(rec *record, sp *spec, wire []map[string]string) error {
	refs, err := parseSecretRefs(wire)
	if err != nil {
		return err
	}
	if sp.secrets, err = s.secrets.resolve(rec.org, refs); err != nil {
		return err
	}
	rec.secrets, rec.hadSecrets = refs, len(refs) > 0
	return nil
}

// checkSecretsExist refuses rec, a new sandbox, when a secret it holds
// was deleted since its create resolved it. Called with s.mu held.
func (s *Server) checkSecretsExist(rec *record) error {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	for _, ref := range rec.secrets {
		if s.secrets.byName[nameKey(rec.org, ref.Name)] == nil {
			return errorf(http.StatusConflict, "Secret %s was deleted meanwhile", ref.Name)
		}
	}
	return nil
}

// secretLocks order the hand-overs of secrets to the engine per sandbox
// (by a hash of its id), so that the last set recorded is the last
// applied.
type secretLocks [64]sync.Mutex

// of returns the lock of sandbox id.
func (l *secretLocks) of(id string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &l[h.Sum32()%uint32(len(l))]
}

// applySecrets hands the secrets sandbox id's record holds, with their
// current values, to the engine; nothing for a sandbox that never held
// any. It takes s.mu itself.
func (s *Server) applySecrets(ctx context.Context, id string) error {
	mu := s.secretLocks.of(id)
	mu.Lock()
	defer mu.Unlock()
	s.mu.Lock()
	rec := s.byID[id]
	var refs []secretRef
	var org string
	had := false
	if rec != nil {
		refs, org, had = slices.Clone(rec.secrets), rec.org, rec.hadSecrets
	}
	s.mu.Unlock()
	if !had {
		return nil
	}
	resolved, err := s.secrets.resolve(org, refs)
	if err != nil {
		return err
	}
	return s.eng.setSecrets(ctx, id, resolved)
}

// reapplyTimeout bounds each sandbox's hand-over of changed secrets.
const reapplyTimeout = 30 * time.Second

// reapply hands their secrets again to the started sandboxes that hold
// one that hold (all those with secrets when hold is nil); failures are
// logged.
func (s *Server) reapply(ctx context.Context, hold func(*record) bool) {
	s.mu.Lock()
	var ids []string
	for _, rec := range s.byID {
		if rec.state == stateStarted && !rec.busy && rec.hadSecrets && (hold == nil || hold(rec)) {
			ids = append(ids, rec.id)
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(ctx, reapplyTimeout)
		if err := s.applySecrets(ctx, id); err != nil {
			s.logf("agentbox serve: sandbox %s: applying its secrets: %v", id, err)
		}
		cancel()
	}
}

// reapplySecret is reapply to the sandboxes of organization org holding
// secret name.
func (s *Server) reapplySecret(ctx context.Context, org, name string) {
	s.reapply(ctx, func(rec *record) bool { return rec.org == org && rec.holdsSecret(name) })
}

// updateSandboxSecrets is api.json's UpdateSandboxSecrets.
type updateSandboxSecrets struct {
	Secrets *[]map[string]string `json:"secrets"`
}

// replaceSandboxSecrets is PUT /sandbox/{id}/secrets: the set given
// replaces the sandbox's (an empty one detaches all), live when it is
// started (new commands see it), else from its next start or resume. It
// answers the Sandbox.
func (s *Server) replaceSandboxSecrets(w http.ResponseWriter, r *http.Request) error {
	var req updateSandboxSecrets
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Secrets == nil {
		return errorf(http.StatusBadRequest, "secrets is required: an array of {ENV: secretName} objects; [] detaches every secret")
	}
	refs, err := parseSecretRefs(*req.Secrets)
	if err != nil {
		return err
	}
	org := orgOf(r)
	resolved, err := s.secrets.resolve(org, refs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	rec, err := s.lookup(org, r.PathValue("id"))
	s.mu.Unlock()
	if err != nil {
		return err
	}
	mu := s.secretLocks.of(rec.id)
	mu.Lock()
	defer mu.Unlock()
	s.mu.Lock()
	// The engine takes the set of a started sandbox live, and checks and
	// keeps that of a stopped one (bad input changes nothing); a paused
	// sandbox gets it when resumed, one in the error state when started.
	give := rec.state == rec.desired && (rec.state == stateStarted || rec.state == stateStopped || rec.state == stateArchived)
	if rec.busy {
		err = errorf(http.StatusConflict, msgStateChange)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if give && (rec.hadSecrets || len(refs) > 0) {
		if err := s.eng.setSecrets(r.Context(), rec.id, resolved); err != nil {
			return lifecycleError("secrets", err)
		}
	}
	return s.withSandbox(func(_ *http.Request, got *record) (any, error) {
		got.secrets, got.hadSecrets = refs, got.hadSecrets || len(refs) > 0
		got.touch(s.now())
		return nil, nil
	})(w, r)
}

// sandboxSecret is an entry of GET /sandbox/{id}/secrets: Daytona's
// answer to its runner, without the value, which agentbox serve never
// answers; its placeholder is placeholderMarker (the sandbox's own is
// its variable's value inside it).
type sandboxSecret struct {
	Env         string   `json:"env"`
	Placeholder string   `json:"placeholder"`
	Hosts       []string `json:"hosts"`
}

// getSandboxSecrets is GET /sandbox/{id}/secrets: the secrets the sandbox
// holds, by variable, with their hosts; never a value.
func (s *Server) getSandboxSecrets(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	var refs []secretRef
	var org string
	if err == nil {
		refs, org = slices.Clone(rec.secrets), rec.org
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	out := make([]sandboxSecret, 0, len(refs))
	s.secrets.mu.Lock()
	for _, ref := range refs {
		e := sandboxSecret{Env: ref.Env, Placeholder: placeholderMarker, Hosts: []string{}}
		if sr := s.secrets.byName[nameKey(org, ref.Name)]; sr != nil {
			e.Hosts = slices.Clone(sr.hosts)
		}
		out = append(out, e)
	}
	s.secrets.mu.Unlock()
	writeJSON(w, out)
	return nil
}

// secretApplier is the server's engine: its engine, and after each start,
// resume and fork the secrets the sandbox's record holds, with their
// current values (values may have changed while it was stopped; a fork's
// placeholders are its own).
type secretApplier struct {
	engine
	s *Server
}

func (a secretApplier) start(ctx context.Context, id string, env map[string]string) error {
	if err := a.engine.start(ctx, id, env); err != nil {
		return err
	}
	return a.apply(ctx, id)
}

func (a secretApplier) resume(ctx context.Context, id string) error {
	if err := a.engine.resume(ctx, id); err != nil {
		return err
	}
	return a.apply(ctx, id)
}

func (a secretApplier) fork(srcID, newID, name string, env map[string]string) (func(context.Context) error, error) {
	run, err := a.engine.fork(srcID, newID, name, env)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := run(ctx); err != nil {
			return err
		}
		if st, err := a.engine.status(ctx, newID); err != nil || !st.running {
			return err
		}
		return a.apply(ctx, newID)
	}, nil
}

// apply is applySecrets, its error said to be about secrets.
func (a secretApplier) apply(ctx context.Context, id string) error {
	if err := a.s.applySecrets(ctx, id); err != nil {
		return fmt.Errorf("applying the sandbox's secrets: %w", err)
	}
	return nil
}

// baseEngine returns the engine secretApplier wraps, for the optional
// interfaces an engine may have (imageEngine, resizer).
func (s *Server) baseEngine() engine {
	if a, ok := s.eng.(secretApplier); ok {
		return a.engine
	}
	return s.eng
}
