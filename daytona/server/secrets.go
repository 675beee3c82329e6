package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The /secret routes (Daytona's SecretApi): create, list (whole and
// paginated), get, update and delete an organization's secrets, by id
// (or name). Answers never hold a value: the Secret DTO has none, and
// what its placeholder field says is placeholderMarker, as placeholders
// are made per sandbox (the local engine's), not per secret.

// placeholderMarker is the placeholder field of every Secret answer: a
// sandbox's placeholder of a secret is random per sandbox and per secret
// (the variable's value in the sandbox), so a secret has none of its own.
// It is no placeholder: the egress proxy never replaces it.
const placeholderMarker = "agentbox_secret_(per-sandbox)"

// secretRoutes adds the routes of secrets with api.
func (s *Server) secretRoutes(api func(pattern string, h handlerFunc)) {
	api("POST /api/secret", s.createSecret)
	api("GET /api/secret", s.listSecrets)
	api("GET /api/secret/paginated", s.listSecretsPaginated)
	api("GET /api/secret/{id}", s.getSecret)
	api("PATCH /api/secret/{id}", s.updateSecret)
	api("DELETE /api/secret/{id}", s.deleteSecret)
	api("PUT /api/sandbox/{id}/secrets", s.replaceSandboxSecrets)
	api("GET /api/sandbox/{id}/secrets", s.getSandboxSecrets)
}

// secretDTO is api.json's Secret.
type secretDTO struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Placeholder string   `json:"placeholder"`
	Hosts       []string `json:"hosts"`
	CreatedAt   string   `json:"createdAt"`
	UpdatedAt   string   `json:"updatedAt"`
}

// dto returns sr as the API answers it. Called with s.secrets.mu held.
func (sr *secretRecord) dto() secretDTO {
	return secretDTO{ID: sr.id, Name: sr.name, Description: sr.description, Placeholder: placeholderMarker,
		Hosts: slices.Clone(sr.hosts), CreatedAt: sr.createdAt.UTC().Format(timeLayout), UpdatedAt: sr.updatedAt.UTC().Format(timeLayout)}
}

// createSecretReq is api.json's CreateSecret; updateSecretReq its
// UpdateSecret, whose absent fields are left as they are.
type createSecretReq struct {
	Name        string   `json:"name"`
	Value       string   `json:"value"`
	Description string   `json:"description"`
	Hosts       []string `json:"hosts"`
}

type updateSecretReq struct {
	Value       *string   `json:"value"`
	Description *string   `json:"description"`
	Hosts       *[]string `json:"hosts"`
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) error {
	var req createSecretReq
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkSecretName(req.Name); err != nil {
		return err
	}
	if err := checkDescription(req.Description); err != nil {
		return err
	}
	if len(req.Hosts) == 0 {
		// Daytona leaves such a secret unrestricted; here a value goes
		// only to hosts named.
		return errorf(http.StatusBadRequest, "hosts is required: list the hosts the value may be sent to (api.example.com, *.example.com); agentbox serve never sends a secret to every host")
	}
	hosts, err := checkSecretValue(req.Value, req.Hosts)
	if err != nil {
		return err
	}
	now := s.now()
	sr := &secretRecord{id: newID(), org: orgOf(r), name: req.Name, description: req.Description, hosts: hosts, createdAt: now, updatedAt: now}
	sr.sealed = s.secrets.box.Seal([]byte(req.Value), sealContext(sr.id))
	s.secrets.mu.Lock()
	if err := s.secrets.add(sr); err != nil {
		s.secrets.mu.Unlock()
		return err
	}
	write, dto := s.saveSecret(sr), sr.dto()
	s.secrets.mu.Unlock()
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording secret %s: %w", sr.id, err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, dto)
	return nil
}

// orgSecrets returns organization org's secrets' answers.
func (s *Server) orgSecrets(org string) []secretDTO {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	out := []secretDTO{}
	for _, sr := range s.secrets.byID {
		if sr.org == org {
			out = append(out, sr.dto())
		}
	}
	return out
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	out := s.orgSecrets(orgOf(r))
	slices.SortFunc(out, func(a, b secretDTO) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, out)
	return nil
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) error {
	s.secrets.mu.Lock()
	sr, err := s.secrets.find(orgOf(r), r.PathValue("id"))
	var dto secretDTO
	if err == nil {
		dto = sr.dto()
	}
	s.secrets.mu.Unlock()
	if err != nil {
		return err
	}
	writeJSON(w, dto)
	return nil
}

// check checks req and returns the hosts it sets in canonical form
// (nil when it sets none).
func (req *updateSecretReq) check() ([]string, error) {
	if req.Description != nil {
		if err := checkDescription(*req.Description); err != nil {
			return nil, err
		}
	}
	if req.Hosts != nil && len(*req.Hosts) == 0 {
		return nil, errorf(http.StatusBadRequest, "hosts is empty: list the hosts the value may be sent to (api.example.com, *.example.com), or leave hosts out to keep them")
	}
	if req.Value == nil && req.Hosts == nil {
		return nil, nil
	}
	// The value's rules are checked with any hosts, and the hosts' with
	// any value, when only one is given.
	value, hosts := "x", []string{"example.com"}
	if req.Value != nil {
		value = *req.Value
	}
	if req.Hosts != nil {
		hosts = *req.Hosts
	}
	canon, err := checkSecretValue(value, hosts)
	if err != nil || req.Hosts == nil {
		return nil, err
	}
	return canon, nil
}

func (s *Server) updateSecret(w http.ResponseWriter, r *http.Request) error {
	var req updateSecretReq
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	hosts, err := req.check()
	if err != nil {
		return err
	}
	org := orgOf(r)
	s.secrets.mu.Lock()
	sr, err := s.secrets.find(org, r.PathValue("id"))
	if err != nil {
		s.secrets.mu.Unlock()
		return err
	}
	if req.Value != nil {
		sr.sealed = s.secrets.box.Seal([]byte(*req.Value), sealContext(sr.id))
	}
	if hosts != nil {
		sr.hosts = hosts
	}
	if req.Description != nil {
		sr.description = *req.Description
	}
	sr.updatedAt = s.now()
	write, dto, name := s.saveSecret(sr), sr.dto(), sr.name
	s.secrets.mu.Unlock()
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording secret %s: %w", dto.ID, err)
	}
	if req.Value != nil || hosts != nil {
		// The running sandboxes that hold it take the change now;
		// stopped ones when they start.
		s.reapplySecret(r.Context(), org, name)
	}
	writeJSON(w, dto)
	return nil
}

// deleteSecret deletes a secret no sandbox holds; one that sandboxes
// hold is 409, naming them: detach it first (PUT /sandbox/{id}/secrets)
// or delete them, so that no sandbox loses a secret it was given without
// being told.
func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	org := orgOf(r)
	s.mu.Lock()
	s.secrets.mu.Lock()
	sr, err := s.secrets.find(org, r.PathValue("id"))
	if err == nil {
		err = s.checkSecretUnused(sr)
	}
	var write *storeWrite
	if err == nil {
		delete(s.secrets.byID, sr.id)
		delete(s.secrets.byName, nameKey(sr.org, sr.name))
		id := sr.id
		write = s.store.removeAsync(bucketSecrets, id, func(err error) {
			s.logf("agentbox serve: removing the record of secret %s: %v", id, err)
		})
	}
	s.secrets.mu.Unlock()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: removing the record of secret %s: %w", sr.id, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkSecretUnused returns a 409 error naming the sandboxes that hold
// sr. Called with s.mu and s.secrets.mu held.
func (s *Server) checkSecretUnused(sr *secretRecord) error {
	var users []string
	for _, rec := range s.byID {
		// A sandbox being deleted holds it no longer.
		if rec.org == sr.org && rec.holdsSecret(sr.name) && rec.desired != stateDestroyed {
			users = append(users, rec.name)
		}
	}
	if len(users) == 0 {
		return nil
	}
	slices.Sort(users)
	more := ""
	if len(users) > 5 {
		users, more = users[:5], fmt.Sprintf(" and %d more", len(users)-5)
	}
	return &httpError{Status: http.StatusConflict, Err: errSecretInUse,
		Message: fmt.Sprintf("Secret %s is in use by sandbox %s%s: detach it first (PUT /sandbox/{id}/secrets without it) or delete those sandboxes", sr.name, strings.Join(users, ", "), more)}
}
