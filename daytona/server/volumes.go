package server

import (
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
	id, name, org        string
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.volumesByName[req.Name] != nil {
		return errorf(http.StatusConflict, "Volume with name %s already exists", req.Name)
	}
	now := s.now()
	v := &volumeRecord{id: volumeIDPrefix + newID(), name: req.Name, org: s.org, createdAt: now, updatedAt: now}
	s.volumes[v.id], s.volumesByName[v.name] = v, v
	writeJSON(w, v.dto())
	return nil
}

func (s *Server) listVolumes(w http.ResponseWriter, _ *http.Request) error {
	s.mu.Lock()
	out := make([]volumeDTO, 0, len(s.volumes))
	for _, v := range s.volumes {
		out = append(out, v.dto())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b volumeDTO) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, out)
	return nil
}

// lookupVolume returns the volume with id or name idOrName. Called with
// s.mu held.
func (s *Server) lookupVolume(idOrName string) (*volumeRecord, error) {
	if v := s.volumes[idOrName]; v != nil {
		return v, nil
	}
	if v := s.volumesByName[idOrName]; v != nil {
		return v, nil
	}
	return nil, errorf(http.StatusNotFound, "Volume %s not found", idOrName)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.volumes[r.PathValue("id")]
	if r.PathValue("name") != "" {
		v = s.volumesByName[r.PathValue("name")]
	}
	if v == nil {
		return errorf(http.StatusNotFound, "Volume %s not found", r.PathValue("id")+r.PathValue("name"))
	}
	writeJSON(w, v.dto())
	return nil
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	v := s.volumes[r.PathValue("id")]
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
	err := s.eng.removeVolume(r.Context(), v.name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		v.deleting = false
		return err
	}
	delete(s.volumes, v.id)
	delete(s.volumesByName, v.name)
	return nil
}

// resolveVolumes replaces the volumeId (an id or a name) of each of vols
// by the volume's id, and returns vols with the volumes' names instead,
// for the engine. Called with s.mu held.
func (s *Server) resolveVolumes(vols []volume) ([]volume, error) {
	named := slices.Clone(vols)
	for i := range vols {
		v, err := s.lookupVolume(vols[i].VolumeID)
		if err != nil || v.deleting {
			return nil, errorf(http.StatusBadRequest, "Volume %s not found: create it first (POST /api/volumes)", vols[i].VolumeID)
		}
		v.lastUsedAt = s.now()
		vols[i].VolumeID, named[i].VolumeID = v.id, v.name
	}
	return named, nil
}
