package server

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// Volumes, as Daytona's: named persistent folders that sandboxes mount at
// creation (volumes: [{volumeId, mountPath}], volumeId an id or a name),
// here the local engine's named volumes. A volume is ready as soon as it
// is created; one in use by a sandbox cannot be deleted (409).

// volumeRecord is the server's view of one volume. Its fields are guarded
// by the Server's mutex.
type volumeRecord struct {
	id, name, org string
	// engineName names the engine's volume: the id (names are unique
	// per organization, the engine's are not, and the engine's volumes
	// of other names are the operator's, no tenant's); the name for
	// volumes of the default organization that older servers made.
	engineName           string
	createdAt, updatedAt time.Time
	lastUsedAt           time.Time
	deleting             bool // being deleted: no sandbox may mount it
}

// volumeDTO is VolumeDto.
type volumeDTO struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	OrganizationID string  `json:"organizationId"`
	State          string  `json:"state"`
	CreatedAt      string  `json:"createdAt"`
	UpdatedAt      string  `json:"updatedAt"`
	LastUsedAt     *string `json:"lastUsedAt"`
	ErrorReason    *string `json:"errorReason"`
}

func (v *volumeRecord) dto() volumeDTO {
	d := volumeDTO{
		ID: v.id, Name: v.name, OrganizationID: v.org, State: "ready",
		CreatedAt: v.createdAt.UTC().Format(timeLayout), UpdatedAt: v.updatedAt.UTC().Format(timeLayout),
	}
	if !v.lastUsedAt.IsZero() {
		used := v.lastUsedAt.UTC().Format(timeLayout)
		d.LastUsedAt = &used
	}
	return d
}

// volumeIDPrefix starts the ids of volumes, as Daytona's examples do.
const volumeIDPrefix = "vol-"

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := local.ValidateID(req.Name); err != nil || strings.HasPrefix(req.Name, volumeIDPrefix) {
		return errorf(http.StatusBadRequest, "volume name %q is invalid: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, not with %q", req.Name, volumeIDPrefix)
	}
	org := orgOf(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.volumesByName[nameKey(org, req.Name)] != nil {
		return errorf(http.StatusConflict, "Volume with name %s already exists", req.Name)
	}
	now := s.now()
	v := &volumeRecord{id: volumeIDPrefix + newID(), name: req.Name, org: org, createdAt: now, updatedAt: now}
	v.engineName = v.id
	if err := s.saveVolume(v); err != nil {
		return err
	}
	s.volumes[v.id], s.volumesByName[nameKey(org, v.name)] = v, v
	writeJSON(w, v.dto())
	return nil
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) error {
	org := orgOf(r)
	s.mu.Lock()
	out := make([]volumeDTO, 0, len(s.volumes))
	for _, v := range s.volumes {
		if v.org == org {
			out = append(out, v.dto())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b volumeDTO) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, out)
	return nil
}

// lookupVolume returns the volume of organization org with id or name
// idOrName. Called with s.mu held.
func (s *Server) lookupVolume(org, idOrName string) (*volumeRecord, error) {
	if v := s.volumes[idOrName]; v != nil && v.org == org {
		return v, nil
	}
	if v := s.volumesByName[nameKey(org, idOrName)]; v != nil {
		return v, nil
	}
	return nil, errorf(http.StatusNotFound, "Volume %s not found", idOrName)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.volumes[r.PathValue("id")]
	if r.PathValue("name") != "" {
		v = s.volumesByName[nameKey(orgOf(r), r.PathValue("name"))]
	}
	if v == nil || v.org != orgOf(r) {
		return errorf(http.StatusNotFound, "Volume %s not found", r.PathValue("id")+r.PathValue("name"))
	}
	writeJSON(w, v.dto())
	return nil
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	v := s.volumes[r.PathValue("id")]
	if v != nil && v.org != orgOf(r) {
		v = nil
	}
	var users []string
	if v != nil && !v.deleting {
		for _, rec := range s.byID {
			if slices.ContainsFunc(rec.volumes, func(sv volume) bool { return sv.VolumeID == v.id }) {
				users = append(users, rec.name)
			}
		}
		v.deleting = len(users) == 0
	}
	s.mu.Unlock()
	switch {
	case v == nil:
		return errorf(http.StatusNotFound, "Volume %s not found", r.PathValue("id"))
	case len(users) > 0:
		slices.Sort(users)
		return errorf(http.StatusConflict, "Volume %s is in use by sandboxes %s: delete them first", v.name, strings.Join(users, ", "))
	case !v.deleting:
		return errorf(http.StatusConflict, "Volume %s is being deleted", v.name)
	}
	err := s.eng.removeVolume(r.Context(), v.engineName)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = s.store.remove(bucketVolumes, v.id)
	}
	if err != nil {
		v.deleting = false
		return err
	}
	delete(s.volumes, v.id)
	delete(s.volumesByName, nameKey(v.org, v.name))
	return nil
}

// resolveVolumes replaces the volumeId (an id or a name) of each of vols
// by the volume's id, and returns vols with the engine's names of the
// volumes instead, for the engine. The volumes are those of organization
// org. Called with s.mu held.
func (s *Server) resolveVolumes(org string, vols []volume) ([]volume, error) {
	named := slices.Clone(vols)
	for i := range vols {
		v, err := s.lookupVolume(org, vols[i].VolumeID)
		if err != nil || v.deleting {
			return nil, errorf(http.StatusBadRequest, "Volume %s not found: create it first (POST /api/volumes)", vols[i].VolumeID)
		}
		v.lastUsedAt = s.now()
		if err := s.saveVolume(v); err != nil {
			return nil, err
		}
		vols[i].VolumeID, named[i].VolumeID = v.id, v.engineName
	}
	return named, nil
}

// storedVolume is a volume's record as the store keeps it.
type storedVolume struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Org        string    `json:"organizationId"`
	EngineName string    `json:"engineName"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	LastUsedAt time.Time `json:"lastUsedAt"`
}

// record returns the record sv keeps.
func (sv *storedVolume) record() *volumeRecord {
	return &volumeRecord{id: sv.ID, name: sv.Name, org: sv.Org, engineName: cmp.Or(sv.EngineName, sv.Name),
		createdAt: sv.CreatedAt, updatedAt: sv.UpdatedAt, lastUsedAt: sv.LastUsedAt}
}

// saveVolume writes v to the store. Called with s.mu held.
func (s *Server) saveVolume(v *volumeRecord) error {
	err := s.store.put(bucketVolumes, v.id, storedVolume{ID: v.id, Name: v.name, Org: v.org, EngineName: v.engineName,
		CreatedAt: v.createdAt, UpdatedAt: v.updatedAt, LastUsedAt: v.lastUsedAt})
	if err != nil {
		return fmt.Errorf("agentbox serve: recording volume %s: %w", v.name, err)
	}
	return nil
}
