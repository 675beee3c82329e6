package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Snapshots, as Daytona's: named images sandboxes are created from. Here
// every named image of the local engine's image store is an active
// snapshot (pulled, built, or taken of a sandbox), besides the default
// one (the host's system folders, DefaultSnapshot); POST /snapshots
// builds one, from an image name (FROM it) or a Dockerfile (buildInfo),
// with the local image builder, one build at a time (the others wait in
// state pending). The server keeps records only of what the store cannot
// tell: snapshots being built or whose build failed, the sizes and
// entrypoint they were created with, and those deactivated, which it
// writes to its own store (snapshotstore.go). The image store persists
// the images themselves.

// Snapshot states, as api.json's SnapshotState spells them.
const (
	snapshotPending     = "pending"
	snapshotBuilding    = "building"
	snapshotPulling     = "pulling"
	snapshotActive      = "active"
	snapshotInactive    = "inactive"
	snapshotError       = "error"
	snapshotBuildFailed = "build_failed"
)

// Name prefixes of the store's images that are not snapshots: the
// intermediate images of builds' RUN steps, and the images built for
// sandboxes created from buildInfo.
const (
	buildStepPrefix    = "agentbox-build:"
	sandboxBuildPrefix = "agentbox-serve-build:"
)

// snapshotSet is the server's records of snapshots (by snapKey), and the
// slots builds take turns in: one per organization, and a few for all.
// Its zero value is empty; its fields are guarded by mu.
type snapshotSet struct {
	mu     sync.Mutex
	byName map[string]*snapshotRecord
	// slots hold a value while a build of their organization runs.
	slots map[string]chan struct{}
	// all holds a value while any build runs; made with records.
	all chan struct{}
	// maxBuilds is the capacity of all: Options.MaxBuilds.
	maxBuilds int
}

// snapKey is the key of the record of organization org's snapshot name.
func snapKey(org, name string) string { return org + "\x00" + name }

// snapshotRecord is what the server knows of a snapshot beyond the store.
type snapshotRecord struct {
	org                  string // the organization that owns it
	name, imageName      string
	buildInfo            *createBuildInfo
	state, errorReason   string
	cpu, gpu, mem, disk  int
	entrypoint           []string
	createdAt, updatedAt time.Time
	lastUsedAt           time.Time
	log                  *buildLog // nil when the server did not build it
}

// snapshotDTO is SnapshotDto.
type snapshotDTO struct {
	ID              string        `json:"id"`
	OrganizationID  string        `json:"organizationId"`
	General         bool          `json:"general"`
	Name            string        `json:"name"`
	ImageName       string        `json:"imageName,omitempty"`
	State           string        `json:"state"`
	Size            *float64      `json:"size"` // GB
	Entrypoint      []string      `json:"entrypoint"`
	CPU             float64       `json:"cpu"`
	GPU             float64       `json:"gpu"`
	Mem             float64       `json:"mem"`
	Disk            float64       `json:"disk"`
	ErrorReason     *string       `json:"errorReason"`
	CreatedAt       string        `json:"createdAt"`
	UpdatedAt       string        `json:"updatedAt"`
	LastUsedAt      *string       `json:"lastUsedAt"`
	BuildInfo       *buildInfoDTO `json:"buildInfo,omitempty"`
	RegionIDs       []string      `json:"regionIds"`
	Ref             string        `json:"ref,omitempty"`
	SourceSandboxID *string       `json:"sourceSandboxId"`
	SandboxClass    string        `json:"sandboxClass"`
}

// buildInfoDTO is BuildInfo.
type buildInfoDTO struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes"`
	SnapshotRef       string   `json:"snapshotRef"`
	CreatedAt         string   `json:"createdAt"`
	UpdatedAt         string   `json:"updatedAt"`
}

// createSnapshot is CreateSnapshot, the body of POST /snapshots.
type createSnapshot struct {
	Name         string           `json:"name"`
	ImageName    string           `json:"imageName"`
	Entrypoint   []string         `json:"entrypoint"`
	CPU          *int             `json:"cpu"`
	GPU          *int             `json:"gpu"`
	Memory       *int             `json:"memory"`
	Disk         *int             `json:"disk"`
	BuildInfo    *createBuildInfo `json:"buildInfo"`
	SandboxClass string           `json:"sandboxClass"`
}

// paginatedSnapshots is PaginatedSnapshots.
type paginatedSnapshots struct {
	Items      []snapshotDTO `json:"items"`
	Total      int           `json:"total"`
	Page       int           `json:"page"`
	TotalPages int           `json:"totalPages"`
}

// snapshotID is the id of the snapshot of organization org (""
// for the default snapshot and the operator's published images) named
// name: a UUID made of both, so that it stays the same across restarts
// of the server.
func snapshotID(org, name string) string {
	seed := "agentbox snapshot\x00" + name
	if org != "" {
		seed = "agentbox snapshot\x00" + org + "\x00" + name
	}
	b := sha256.Sum256([]byte(seed))
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// isSnapshotName reports whether a name a tenant asks for may be a
// snapshot's.
func isSnapshotName(n string) bool {
	for _, p := range []string{buildStepPrefix, sandboxBuildPrefix, orgImagePrefix, pullImagePrefix} {
		if strings.HasPrefix(n, p) {
			return false
		}
	}
	return true
}

// records returns the record map, made when missing. Called with ss.mu
// held.
func (ss *snapshotSet) records() map[string]*snapshotRecord {
	if ss.byName == nil {
		ss.byName = map[string]*snapshotRecord{}
		ss.slots = map[string]chan struct{}{}
		ss.all = make(chan struct{}, cmp.Or(ss.maxBuilds, defaultMaxBuilds))
	}
	return ss.byName
}

// snapshotView is one snapshot as listed: a record, an image, or both.
type snapshotView struct {
	rec  *snapshotRecord // nil for an image the server did not build
	img  *imageInfo      // nil while building, after a failure, for the default
	name string
	// owner is the organization of the snapshot; "" for the default
	// and the operator's published images, every organization's.
	owner string
	// storeName is the image's name in the store ("" for the default).
	storeName string
}

// id is the snapshot's id.
func (v snapshotView) id() string { return snapshotID(v.owner, v.name) }

func (v snapshotView) dto(org string) snapshotDTO {
	d := snapshotDTO{
		ID: v.id(), OrganizationID: org, Name: v.name, State: snapshotActive,
		RegionIDs: []string{DefaultTarget}, Ref: v.name, SandboxClass: "container",
	}
	var created, updated time.Time
	if img := v.img; img != nil {
		gb := float64(img.size) / 1e9
		d.Size = &gb
		d.Entrypoint = img.entrypoint
		created, updated = img.created, img.created
	}
	if r := v.rec; r != nil {
		d.ImageName = r.imageName
		if len(r.entrypoint) > 0 {
			d.Entrypoint = r.entrypoint
		}
		d.CPU, d.GPU, d.Mem, d.Disk = float64(r.cpu), float64(r.gpu), float64(r.mem), float64(r.disk)
		d.State, created, updated = r.state, r.createdAt, r.updatedAt
		if r.errorReason != "" {
			d.ErrorReason = &r.errorReason
		}
		if !r.lastUsedAt.IsZero() {
			used := r.lastUsedAt.UTC().Format(timeLayout)
			d.LastUsedAt = &used
		}
		if bi := r.buildInfo; bi != nil {
			d.BuildInfo = &buildInfoDTO{DockerfileContent: bi.DockerfileContent, ContextHashes: []string{},
				SnapshotRef: v.name, CreatedAt: r.createdAt.UTC().Format(timeLayout), UpdatedAt: r.updatedAt.UTC().Format(timeLayout)}
		}
	}
	if v.owner == "" {
		d.General = true
	}
	d.CreatedAt, d.UpdatedAt = created.UTC().Format(timeLayout), updated.UTC().Format(timeLayout)
	return d
}

// snapshotViews returns every snapshot organization org sees: the
// default, its images of the store, the operator's published images, and
// the records of its snapshots not in the store (being built, failed),
// sorted by name. An organization's snapshot hides a published image of
// its name.
func (s *Server) snapshotViews(ctx context.Context, org string) ([]snapshotView, error) {
	ie, err := s.imageStore("snapshots")
	if err != nil {
		return nil, err
	}
	imgs, err := ie.images(ctx)
	if err != nil {
		return nil, err
	}
	views := []snapshotView{{name: DefaultSnapshot}}
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	recs := s.snapshots.records()
	seen := map[string]bool{DefaultSnapshot: true}
	var published []snapshotView
	for i := range imgs {
		for _, n := range imgs[i].names {
			if o, name, ok := orgOfImageName(n); ok && o == org && !seen[name] {
				seen[name] = true
				views = append(views, snapshotView{name: name, img: &imgs[i], rec: recs[snapKey(org, name)], owner: org, storeName: n})
			} else if s.pol.isPublished(n) {
				published = append(published, snapshotView{name: n, img: &imgs[i], storeName: n})
			}
		}
	}
	for k, r := range recs {
		switch {
		case r.org != org:
		case seen[r.name]:
		case r.state == snapshotActive || r.state == snapshotInactive:
			delete(recs, k) // its image was removed behind the server's back
			s.unrecordSnapshot(r.org, r.name)
		default:
			seen[r.name] = true
			views = append(views, snapshotView{name: r.name, rec: r, owner: org, storeName: orgImageName(org, r.name)})
		}
	}
	for _, v := range published {
		if !seen[v.name] {
			seen[v.name] = true
			views = append(views, v)
		}
	}
	slices.SortFunc(views, func(a, b snapshotView) int { return strings.Compare(a.name, b.name) })
	return views, nil
}

// findSnapshot returns the snapshot with id or name ref that
// organization org sees; 404 for any other, another organization's
// included.
func (s *Server) findSnapshot(ctx context.Context, org, ref string) (snapshotView, error) {
	views, err := s.snapshotViews(ctx, org)
	if err != nil {
		return snapshotView{}, err
	}
	for _, v := range views {
		if v.name == ref || v.id() == ref {
			return v, nil
		}
	}
	return snapshotView{}, errorf(http.StatusNotFound, "Snapshot %s not found", ref)
}

// view is the snapshot of rec as listed before its image exists.
func (rec *snapshotRecord) view() snapshotView {
	return snapshotView{name: rec.name, rec: rec, owner: rec.org, storeName: orgImageName(rec.org, rec.name)}
}

// storeNameOf returns the store's name of the image rec's sandbox is made
// of: its build's, its organization's snapshot's, or a published image's.
func (s *Server) storeNameOf(ctx context.Context, rec *record) string {
	if rec.build != nil || strings.HasPrefix(rec.snapshot, sandboxBuildPrefix) {
		return rec.snapshot
	}
	if v, err := s.findSnapshot(ctx, rec.org, rec.snapshot); err == nil && v.storeName != "" {
		return v.storeName
	}
	return orgImageName(rec.org, rec.snapshot)
}
