package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// maxBody bounds the JSON bodies the server reads.
const maxBody = 1 << 20

// decodeJSON reads r's JSON body into v (an absent body leaves v as it
// is), answering malformed JSON and wrong types with 400.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", maxBody)
		}
		return &httpError{Status: http.StatusBadRequest, Message: "reading the request body failed", Err: err}
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return errorf(http.StatusBadRequest, "%s must be a %s, not a JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
		}
		return errorf(http.StatusBadRequest, "the request body is not valid JSON: %v", err)
	}
	return nil
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	var req createSandbox
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := unsupported(&req); err != nil {
		return err
	}
	rec, sp, err := s.newRecord(orgOf(r), &req)
	if err != nil {
		return err
	}
	if err := s.attachSecrets(rec, &sp, req.Secrets); err != nil {
		return err
	}
	// Before a build the create may start; addRecord checks again.
	s.mu.Lock()
	err = s.checkSandboxQuota(rec.org)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.mu.Lock()
	sp.volumes, err = s.resolveVolumes(rec.org, rec.volumes)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	sp.daytonaToolbox = s.daytonaToolbox(r)
	if done, err := s.createFromWarmPool(w, r, rec, sp, &req); done || err != nil {
		return err
	}
	start, err := s.prepareCreate(r.Context(), rec, sp, &req)
	if err != nil {
		return err
	}
	dto, write, err := s.addRecord(rec, start, s.toolboxProxyURL(r))
	if err != nil {
		if rec.build != nil {
			rec.build.release() // its build never runs
		}
		return err
	}
	// Answered once recorded: a kill -9 then does not lose the sandbox.
	// (When the write fails the sandbox is created nevertheless; a new
	// server would not know it.)
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording sandbox %s: %w", rec.id, err)
	}
	writeJSON(w, dto)
	return nil
}

// checkSandboxQuota returns a 403 error when organization org has as
// many sandboxes as its quota allows. Called with s.mu held.
func (s *Server) checkSandboxQuota(org string) error {
	if s.maxSandboxes == 0 {
		return nil
	}
	n := 0
	for _, rec := range s.byID {
		if rec.org == org {
			n++
		}
	}
	if n >= s.maxSandboxes {
		return errorf(http.StatusForbidden, "Sandbox quota exceeded: organization %s has %d sandboxes, the most this server allows (agentbox serve --max-sandboxes-per-org, now %d): delete some first, or ask the operator to raise the quota", org, n, s.maxSandboxes)
	}
	return nil
}

// addRecord adds rec, a new sandbox, to the server and starts its
// creation with start. It returns the answer to the create and the
// record's write to wait for before answering.
func (s *Server) addRecord(rec *record, start func(context.Context) (sizes, error), proxyURL string) (sandboxDTO, *storeWrite, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkAddable(rec); err != nil {
		return sandboxDTO{}, nil, err
	}
	for _, v := range rec.volumes {
		if vr := s.volumes[v.VolumeID]; vr == nil || vr.deleting {
			return sandboxDTO{}, nil, errorf(http.StatusConflict, "Volume %s was deleted meanwhile", v.VolumeID)
		}
	}
	if err := s.beginCreate(rec, start); err != nil {
		return sandboxDTO{}, nil, err
	}
	return s.insert(rec, proxyURL)
}

// insert adds rec, a new sandbox, to the server's records and publishes
// its creation; it returns the answer to the create and the record's
// write. Called with s.mu held.
func (s *Server) insert(rec *record, proxyURL string) (sandboxDTO, *storeWrite, error) {
	s.byID[rec.id], s.byName[nameKey(rec.org, rec.name)] = rec, rec
	write, err := s.save(rec)
	if err != nil {
		return sandboxDTO{}, nil, err
	}
	s.events.publish(&event{org: rec.org, name: eventCreated, dto: rec.dto("")})
	return rec.dto(proxyURL), write, nil
}

// checkAddable refuses rec, a new sandbox, when its organization has a
// sandbox of its name or no quota left. Called with s.mu held.
func (s *Server) checkAddable(rec *record) error {
	if s.byName[nameKey(rec.org, rec.name)] != nil || s.byID[rec.name] != nil {
		return errorf(http.StatusConflict, "Sandbox with name %s already exists", rec.name)
	}
	if err := s.checkSecretsExist(rec); err != nil {
		return err
	}
	return s.checkSandboxQuota(rec.org)
}

// newRecord checks req and returns the record of a new sandbox of
// organization org and what the engine creates it with.
func (s *Server) newRecord(org string, req *createSandbox) (*record, spec, error) {
	now := s.now()
	rec := &record{
		id:           newID(),
		name:         req.Name,
		org:          org,
		user:         req.User,
		snapshot:     DefaultSnapshot,
		target:       req.Target,
		env:          maps.Clone(req.Env),
		labels:       maps.Clone(req.Labels),
		public:       req.Public,
		previewToken: newToken(),
		volumes:      req.Volumes,
		autoStop:     15,
		autoArchive:  7 * 24 * 60,
		autoDelete:   -1,
		createdAt:    now,
		updatedAt:    now,
	}
	if rec.name == "" {
		rec.name = rec.id
	} else if err := checkName(rec.name); err != nil {
		return nil, spec{}, err
	}
	var err error
	if rec.network, err = sandbox.ParseNetworkPolicy(req.NetworkBlockAll, req.NetworkAllowList, req.DomainAllowList); err != nil {
		return nil, spec{}, engineError(err)
	}
	rec.user, rec.target = cmp.Or(rec.user, DefaultUser), cmp.Or(rec.target, DefaultTarget)
	for _, iv := range []struct {
		name  string
		v     *int
		dst   *int
		least int
	}{
		{"autoStopInterval", req.AutoStopInterval, &rec.autoStop, 0},
		{"autoArchiveInterval", req.AutoArchiveInterval, &rec.autoArchive, 0},
		{"autoDeleteInterval", req.AutoDeleteInterval, &rec.autoDelete, math.MinInt},
	} {
		if iv.v == nil {
			continue
		}
		if *iv.v < iv.least {
			return nil, spec{}, errorf(http.StatusBadRequest, "%s must not be less than %d", iv.name, iv.least)
		}
		*iv.dst = *iv.v
	}
	if err := setPauseAndTTL(rec, req); err != nil {
		return nil, spec{}, err
	}
	sp := spec{name: rec.name, user: rec.user, env: rec.env, network: rec.network, volumes: rec.volumes,
		language: rec.labels["code-toolbox-language"]}
	if req.Snapshot != "" && req.Snapshot != DefaultSnapshot {
		rec.snapshot, sp.image = req.Snapshot, req.Snapshot
	}
	for _, res := range []struct {
		name string
		v    *int
		got  *float64
	}{
		{"cpu", req.CPU, &rec.sizes.cpu},
		{"memory", req.Memory, &rec.sizes.memoryGiB},
		{"disk", req.Disk, &rec.sizes.diskGiB},
	} {
		if res.v == nil {
			continue
		}
		if *res.v < 1 {
			return nil, spec{}, errorf(http.StatusBadRequest, "%s must not be less than 1", res.name)
		}
		*res.got = float64(*res.v)
	}
	sp.resources = rec.sizes.resources()
	if err := checkVolumes(req.Volumes); err != nil {
		return nil, spec{}, err
	}
	return rec, sp, nil
}

// checkVolumes refuses volumes of a create without an id or an absolute
// mount path.
func checkVolumes(vs []volume) error {
	for i, v := range vs {
		if v.VolumeID == "" || !strings.HasPrefix(v.MountPath, "/") {
			return errorf(http.StatusBadRequest, "volumes[%d] needs a volumeId and an absolute mountPath", i)
		}
	}
	return nil
}

// checkName refuses sandbox names that cannot be a path segment.
func checkName(name string) error {
	if len(name) > 255 || strings.ContainsFunc(name, func(c rune) bool { return c == '/' || unicode.IsSpace(c) || !unicode.IsPrint(c) }) {
		return errorf(http.StatusBadRequest, "name %q is invalid: at most 255 printable characters, no spaces or slashes", name)
	}
	return nil
}

// withSandbox returns a handler for the sandbox named by the path: fn
// runs with s.mu held and returns the answer's body; what it changed in
// the record is saved before the answer.
func (s *Server) withSandbox(fn func(r *http.Request, rec *record) (any, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		v, write, err := s.callLocked(r, fn)
		if err != nil {
			return err
		}
		// Answered once recorded, without holding s.mu meanwhile.
		if err := write.wait(); err != nil {
			return fmt.Errorf("agentbox serve: recording sandbox %s: %w", r.PathValue("id"), err)
		}
		writeJSON(w, v)
		return nil
	}
}

// callLocked runs fn with s.mu held, for the sandbox named by r's path,
// and returns the answer's body and the record's latest write.
func (s *Server) callLocked(r *http.Request, fn func(r *http.Request, rec *record) (any, error)) (any, *storeWrite, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	v, err := fn(r, rec)
	if err != nil {
		return nil, nil, err
	}
	write, err := s.save(rec)
	if err != nil {
		return nil, nil, err
	}
	if v == nil {
		v = rec.dto(s.toolboxProxyURL(r))
	}
	return v, write, nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.observe(r.Context(), rec) // may find it gone: then the lookup below fails
	return s.withSandbox(func(*http.Request, *record) (any, error) { return nil, nil })(w, r)
}

// lifecycleCall returns the handler of a lifecycle call: begin moves the
// sandbox to its transitional state, and the answer shows it.
func (s *Server) lifecycleCall(begin func(rec *record) error) handlerFunc {
	return s.withSandbox(func(_ *http.Request, rec *record) (any, error) {
		return nil, begin(rec)
	})
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) error {
	if f := r.URL.Query().Get("force"); f != "" {
		// The local engine always ends every process at once.
		if _, err := parseBool("force", f); err != nil {
			return err
		}
	}
	return s.lifecycleCall(s.beginStop)(w, r)
}

func (s *Server) replaceLabels(w http.ResponseWriter, r *http.Request) error {
	var req sandboxLabels
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Labels == nil {
		return errorf(http.StatusBadRequest, "labels must be an object")
	}
	return s.withSandbox(func(_ *http.Request, rec *record) (any, error) {
		rec.labels = maps.Clone(req.Labels)
		rec.touch(s.now())
		return sandboxLabels{Labels: maps.Clone(rec.labels)}, nil
	})(w, r)
}

// setInterval returns the handler setting an interval (minutes, at least
// least) with set.
func (s *Server) setInterval(set func(rec *record, minutes int), least int) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		raw := r.PathValue("interval")
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || f != math.Trunc(f) || f < float64(least) || f > math.MaxInt32 {
			return errorf(http.StatusBadRequest, "interval %q must be a whole number of minutes, at least %d", raw, least)
		}
		return s.withSandbox(func(_ *http.Request, rec *record) (any, error) {
			set(rec, int(f))
			rec.touch(s.now())
			return nil, nil
		})(w, r)
	}
}

func (s *Server) setPublic(w http.ResponseWriter, r *http.Request) error {
	public, err := parseBool("isPublic", r.PathValue("isPublic"))
	if err != nil {
		return err
	}
	return s.withSandbox(func(_ *http.Request, rec *record) (any, error) {
		rec.public = public
		rec.touch(s.now())
		return nil, nil
	})(w, r)
}

func (s *Server) getToolboxProxyURL(w http.ResponseWriter, r *http.Request) error {
	return s.withSandbox(func(r *http.Request, _ *record) (any, error) {
		return toolboxProxyURL{URL: s.toolboxProxyURL(r)}, nil
	})(w, r)
}

// updateNetwork changes the network policy of a sandbox: the fields the
// body has replace the sandbox's, live. The engine call runs without
// s.mu; a concurrent update may interleave, and the last one applied wins
// in the engine and in the record alike.
func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request) error {
	var req networkSettings
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	var n sandbox.NetworkPolicy
	if err == nil {
		n = rec.network
		if rec.busy {
			err = errorf(http.StatusConflict, msgStateChange)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if n, err = req.apply(n); err != nil {
		return engineError(err)
	}
	if err := s.eng.setNetwork(r.Context(), rec.id, n); err != nil {
		if errNotFound(err) {
			return errorf(http.StatusNotFound, "Sandbox with ID or name %s not found", r.PathValue("id"))
		}
		return engineError(fmt.Errorf("network settings: %w", err))
	}
	return s.withSandbox(func(_ *http.Request, got *record) (any, error) {
		got.network = n
		got.touch(s.now())
		return nil, nil
	})(w, r)
}
