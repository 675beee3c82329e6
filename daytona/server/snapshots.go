package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
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

// defaultMaxBuilds is how many builds run at once, of all organizations,
// when Options.MaxBuilds is 0.
const defaultMaxBuilds = 4

// takeSlot waits for the build slot of organization org (one build of
// an organization runs at a time), then for one of all organizations';
// release gives them back.
func (ss *snapshotSet) takeSlot(ctx context.Context, org string) (release func(), err error) {
	ss.mu.Lock()
	ss.records()
	slot := ss.slots[org]
	if slot == nil {
		slot = make(chan struct{}, 1)
		ss.slots[org] = slot
	}
	all := ss.all
	ss.mu.Unlock()
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case all <- struct{}{}:
		return func() { <-all; <-slot }, nil
	case <-ctx.Done():
		<-slot
		return nil, ctx.Err()
	}
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

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req createSnapshot
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	ie, err := s.imageStore("snapshots")
	if err != nil {
		return err
	}
	org := orgOf(r)
	rec, dockerfile, err := newSnapshotRecord(&req, s.now())
	if err != nil {
		return err
	}
	rec.org = org
	views, err := s.snapshotViews(r.Context(), org)
	if err != nil {
		return err
	}
	if err := s.checkDockerfileRefs(org, dockerfile, views); err != nil {
		return err
	}
	if slices.ContainsFunc(views, func(v snapshotView) bool { return v.name == req.Name && v.owner == org }) {
		return errorf(http.StatusConflict, "Snapshot with name %s already exists", req.Name)
	}
	release, err := s.reserveBuild(r.Context(), ie, org)
	if err != nil {
		return err
	}
	s.snapshots.mu.Lock()
	recs := s.snapshots.records()
	key := snapKey(org, rec.name)
	if recs[key] != nil {
		s.snapshots.mu.Unlock()
		release()
		return errorf(http.StatusConflict, "Snapshot with name %s already exists", req.Name)
	}
	recs[key] = rec
	dto := rec.view().dto(org)
	write := s.saveSnapshot(rec)
	// Published before the build moves it on, as its write is queued
	// before the build's.
	s.events.publish(&event{org: org, name: eventSnapshotCreated, data: dto})
	s.snapshots.mu.Unlock()
	if err := s.background(func(ctx context.Context) {
		defer release()
		s.buildSnapshot(ctx, ie, rec, dockerfile)
	}); err != nil {
		release()
		s.snapshots.mu.Lock()
		delete(recs, key)
		s.unrecordSnapshot(org, rec.name)
		s.events.publish(&event{org: org, name: eventSnapshotRemoved, data: dto.ID})
		s.snapshots.mu.Unlock()
		return err
	}
	// Answered once recorded: a kill -9 then does not lose the snapshot.
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording snapshot %s: %w", rec.name, err)
	}
	writeJSON(w, dto)
	return nil
}

// newSnapshotRecord checks req and returns the record of the snapshot it
// asks for and the Dockerfile that builds it.
func newSnapshotRecord(req *createSnapshot, now time.Time) (*snapshotRecord, string, error) {
	switch {
	case req.Name == "" || strings.ContainsFunc(req.Name, func(c rune) bool { return c <= ' ' || c == 0x7f }) || strings.HasPrefix(req.Name, "sha256:"):
		return nil, "", errorf(http.StatusBadRequest, "name %q is invalid: a snapshot needs a name without spaces that does not start with sha256:", req.Name)
	case !isSnapshotName(req.Name) || req.Name == DefaultSnapshot:
		return nil, "", errorf(http.StatusBadRequest, "name %q is reserved: choose another", req.Name)
	case strings.HasSuffix(req.Name, ":latest") || strings.HasSuffix(req.ImageName, ":latest"):
		return nil, "", errorf(http.StatusBadRequest, `Snapshots with tag ":latest" are not allowed`)
	case strings.ContainsFunc(req.ImageName, func(c rune) bool { return c <= ' ' || c == 0x7f }):
		return nil, "", errorf(http.StatusBadRequest, "imageName %q is invalid: write an image reference without spaces", req.ImageName)
	case (req.ImageName == "") == (req.BuildInfo == nil):
		return nil, "", errorf(http.StatusBadRequest, "give either imageName or buildInfo")
	case req.GPU != nil && *req.GPU > 0:
		return nil, "", errorf(http.StatusNotImplemented, "agentbox serve does not support GPUs yet: create the snapshot without gpu")
	case req.SandboxClass != "" && req.SandboxClass != "container":
		return nil, "", errorf(http.StatusBadRequest, "sandboxClass %q: agentbox serve's sandboxes are containers", req.SandboxClass)
	}
	rec := &snapshotRecord{name: req.Name, imageName: req.ImageName, buildInfo: req.BuildInfo, state: snapshotPending,
		entrypoint: req.Entrypoint, createdAt: now, updatedAt: now, log: &buildLog{}}
	for _, res := range []struct {
		name string
		v    *int
		dst  *int
	}{{"cpu", req.CPU, &rec.cpu}, {"memory", req.Memory, &rec.mem}, {"disk", req.Disk, &rec.disk}} {
		if res.v != nil {
			if *res.v < 1 {
				return nil, "", errorf(http.StatusBadRequest, "%s must not be less than 1", res.name)
			}
			*res.dst = *res.v
		}
	}
	if bi := req.BuildInfo; bi != nil {
		if err := checkBuildInfo(bi); err != nil {
			return nil, "", err
		}
		if len(req.Entrypoint) == 0 {
			return rec, bi.DockerfileContent, nil
		}
		return rec, bi.DockerfileContent + "\n" + entrypointLine(req.Entrypoint), nil
	}
	df := "FROM " + req.ImageName + "\n"
	if len(req.Entrypoint) > 0 {
		df += entrypointLine(req.Entrypoint)
	}
	return rec, df, nil
}

// view is the snapshot of rec as listed before its image exists.
func (rec *snapshotRecord) view() snapshotView {
	return snapshotView{name: rec.name, rec: rec, owner: rec.org, storeName: orgImageName(rec.org, rec.name)}
}

// checkDockerfileRefs refuses (400) a Dockerfile of organization org
// whose FROM or COPY --from names what org may not use (tenancy.go): a
// host path, a layout, a tarball, an id. views are the snapshots org
// sees; names made of build arguments are checked by the build.
func (s *Server) checkDockerfileRefs(org, dockerfile string, views []snapshotView) error {
	refs, err := dockerfileRefs(dockerfile)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if slices.ContainsFunc(views, func(v snapshotView) bool { return v.name == ref && v.owner == org }) || s.pol.isPublished(ref) {
			continue
		}
		if _, err := checkImageRef(ref); err != nil {
			return err
		}
	}
	return nil
}

// entrypointLine is the Dockerfile instruction setting entrypoint.
func entrypointLine(entrypoint []string) string {
	b, _ := json.Marshal(entrypoint)
	return "ENTRYPOINT " + string(b) + "\n"
}

// checkBuildInfo refuses a buildInfo the server cannot build.
func checkBuildInfo(bi *createBuildInfo) error {
	if strings.TrimSpace(bi.DockerfileContent) == "" {
		return errorf(http.StatusBadRequest, "buildInfo.dockerfileContent must not be empty")
	}
	if len(bi.ContextHashes) > 0 {
		return errorf(http.StatusNotImplemented, "agentbox serve does not support build contexts (buildInfo.contextHashes: files uploaded to object storage) yet: build the image with `agentbox image build` and use it by name")
	}
	return nil
}

// background runs fn in the background until the server closes, as
// launch does for lifecycle operations; 503 once Close was called.
func (s *Server) background(fn func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return &httpError{Status: http.StatusServiceUnavailable, Message: errClosed.Error(), Err: errClosed}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.ctx)
	}()
	return nil
}

// buildSnapshot builds rec's image, moving rec through its states,
// each recorded. When the server's end cuts it short, rec keeps its
// state, which the next server makes build_failed.
func (s *Server) buildSnapshot(ctx context.Context, ie imageEngine, rec *snapshotRecord, dockerfile string) {
	defer rec.log.close()
	set := func(state, reason string) {
		s.snapshots.mu.Lock()
		defer s.snapshots.mu.Unlock()
		old := rec.state
		rec.state, rec.errorReason, rec.updatedAt = state, reason, s.now()
		s.saveSnapshot(rec)
		s.publishSnapshotState(rec, old)
	}
	release, err := s.snapshots.takeSlot(ctx, rec.org)
	if err != nil {
		return // the server is closing
	}
	defer release()
	failed := snapshotError
	if rec.buildInfo != nil {
		set(snapshotBuilding, "")
		failed = snapshotBuildFailed
	} else {
		set(snapshotPulling, "")
	}
	bctx, cancel := context.WithTimeoutCause(ctx, s.buildTimeout, errBuildTimeout(s.buildTimeout))
	defer cancel()
	job := buildJob{org: rec.org, dockerfile: dockerfile, name: orgImageName(rec.org, rec.name), pol: &s.pol}
	if _, err := ie.build(bctx, job, &recordedLog{s: s, rec: rec}); err != nil {
		if ctx.Err() != nil {
			return // the server is closing
		}
		if bctx.Err() != nil {
			err = context.Cause(bctx)
		}
		fmt.Fprintf(rec.log, "Build failed: %v\n", err)
		s.logf("agentbox serve: snapshot %s: %v", rec.name, err)
		set(failed, err.Error())
		return
	}
	set(snapshotActive, "")
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	page, err := positiveQuery(q.Get("page"), "page", 1, maxInt32)
	if err != nil {
		return err
	}
	limit, err := positiveQuery(q.Get("limit"), "limit", 100, 200)
	if err != nil {
		return err
	}
	sortBy, order := cmp.Or(q.Get("sort"), "lastUsedAt"), cmp.Or(q.Get("order"), "desc")
	if !slices.Contains([]string{"name", "state", "lastUsedAt", "createdAt"}, sortBy) {
		return errorf(http.StatusBadRequest, "sort must be one of the following values: name, state, lastUsedAt, createdAt")
	}
	if order != "asc" && order != "desc" {
		return errorf(http.StatusBadRequest, "order must be one of the following values: asc, desc")
	}
	views, err := s.snapshotViews(r.Context(), orgOf(r))
	if err != nil {
		return err
	}
	var items []snapshotDTO
	s.snapshots.mu.Lock()
	for _, v := range views {
		if strings.Contains(strings.ToLower(v.name), strings.ToLower(q.Get("name"))) {
			items = append(items, v.dto(orgOf(r)))
		}
	}
	s.snapshots.mu.Unlock()
	key := func(d snapshotDTO) string {
		switch sortBy {
		case "name":
			return d.Name
		case "state":
			return d.State
		case "lastUsedAt":
			if d.LastUsedAt != nil {
				return *d.LastUsedAt
			}
		}
		return d.CreatedAt
	}
	slices.SortStableFunc(items, func(a, b snapshotDTO) int {
		if order == "desc" {
			return strings.Compare(key(b), key(a))
		}
		return strings.Compare(key(a), key(b))
	})
	out := paginatedSnapshots{Items: []snapshotDTO{}, Total: len(items), Page: page, TotalPages: (len(items) + limit - 1) / limit}
	if lo := (page - 1) * limit; lo < len(items) {
		out.Items = items[lo:min(lo+limit, len(items))]
	}
	writeJSON(w, out)
	return nil
}

// maxInt32 bounds numbers of the query.
const maxInt32 = 1<<31 - 1

// positiveQuery parses the query value v of name: def when empty, else a
// whole number from 1 to most.
func positiveQuery(v, name string, def, most int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, errorf(http.StatusBadRequest, "%s must be a whole number from 1 to %d", name, most)
	}
	return n, nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	writeJSON(w, v.dto(orgOf(r)))
	return nil
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	if v.name == DefaultSnapshot {
		return errorf(http.StatusBadRequest, "Snapshot %s is the default snapshot (the host's system folders) and cannot be deleted", v.name)
	}
	if v.owner == "" {
		return errorf(http.StatusForbidden, "Snapshot %s is an image the operator of agentbox serve published: only the operator can remove it", v.name)
	}
	s.snapshots.mu.Lock()
	if r := v.rec; r != nil && (r.state == snapshotPending || r.state == snapshotBuilding || r.state == snapshotPulling) {
		s.snapshots.mu.Unlock()
		return errorf(http.StatusConflict, "Snapshot %s is %s: delete it once its build has ended", v.name, r.state)
	}
	s.snapshots.mu.Unlock()
	if v.img != nil {
		ie, err := s.imageStore("snapshots")
		if err != nil {
			return err
		}
		if err := ie.untag(r.Context(), v.storeName); err != nil && !errNotFound(err) {
			return err
		}
	}
	s.snapshots.mu.Lock()
	var write *storeWrite
	if key := snapKey(v.owner, v.name); s.snapshots.records()[key] == v.rec {
		delete(s.snapshots.records(), key)
		write = s.unrecordSnapshot(v.owner, v.name)
	}
	s.snapshots.mu.Unlock()
	if err := write.wait(); err != nil {
		return err
	}
	s.events.publish(&event{org: v.owner, name: eventSnapshotRemoved, data: v.id()})
	return nil
}

// setSnapshotActive returns the handler of activate (active true) and
// deactivate.
func (s *Server) setSnapshotActive(active bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
		if err != nil {
			return err
		}
		if v.name == DefaultSnapshot {
			return errorf(http.StatusBadRequest, "Snapshot %s is the default snapshot and is always active", v.name)
		}
		if v.owner == "" {
			return errorf(http.StatusForbidden, "Snapshot %s is an image the operator of agentbox serve published: only the operator can change it", v.name)
		}
		s.snapshots.mu.Lock()
		rec := v.rec
		if rec == nil {
			now := s.now()
			rec = &snapshotRecord{org: v.owner, name: v.name, state: snapshotActive, createdAt: v.img.created, updatedAt: now}
			s.snapshots.records()[snapKey(v.owner, v.name)] = rec
			v.rec = rec
		}
		switch {
		case active && rec.state == snapshotActive:
			s.snapshots.mu.Unlock()
			return errorf(http.StatusBadRequest, "Snapshot %s is already active", v.name)
		case active && rec.state != snapshotInactive, !active && rec.state != snapshotActive && rec.state != snapshotInactive:
			s.snapshots.mu.Unlock()
			return errorf(http.StatusBadRequest, "Snapshot %s is %s, not inactive", v.name, rec.state)
		case active:
			rec.state = snapshotActive
		default:
			rec.state = snapshotInactive
		}
		rec.updatedAt = s.now()
		s.publishSnapshotState(rec, map[bool]string{true: snapshotInactive, false: snapshotActive}[active])
		write, dto := s.saveSnapshot(rec), v.dto(orgOf(r))
		s.snapshots.mu.Unlock()
		if err := write.wait(); err != nil {
			return fmt.Errorf("agentbox serve: recording snapshot %s: %w", v.name, err)
		}
		if !active {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		writeJSON(w, dto)
		return nil
	}
}

func (s *Server) getSnapshotBuildLogsURL(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, toolboxProxyURL{URL: s.baseURL(r) + "/api/snapshots/" + v.id() + "/build-logs"})
	return nil
}

func (s *Server) getSnapshotBuildLogs(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	if v.rec == nil || v.rec.log == nil {
		return errorf(http.StatusNotFound, "Snapshot %s has no build logs: agentbox serve did not build it", v.name)
	}
	return serveBuildLog(w, r, v.rec.log)
}

// usableSnapshot checks that the snapshot ref (a name or id) organization
// org sees may make a new sandbox, records its use, and returns it and
// the sizes it was created with (0 for the engine's default). Anything
// else (an image of the store by another name, an id or a prefix of one,
// a path) is refused with 400.
func (s *Server) usableSnapshot(ctx context.Context, org, ref string) (snapshotView, snapshotRecord, error) {
	v, err := s.findSnapshot(ctx, org, ref)
	if errors.As(err, new(*httpError)) {
		return snapshotView{}, snapshotRecord{}, errorf(http.StatusBadRequest, "Snapshot %s not found: create it first (POST /api/snapshots)", ref)
	}
	if err != nil {
		return snapshotView{}, snapshotRecord{}, err
	}
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	if v.rec == nil {
		return v, snapshotRecord{}, nil
	}
	if v.rec.state != snapshotActive {
		return snapshotView{}, snapshotRecord{}, errorf(http.StatusBadRequest, "Snapshot %s is %s", v.name, v.rec.state)
	}
	v.rec.lastUsedAt = s.now()
	s.saveSnapshot(v.rec)
	return v, snapshotRecord{cpu: v.rec.cpu, mem: v.rec.mem, disk: v.rec.disk}, nil
}

// recordedLog is the build log of a snapshot being built, written to the
// snapshot's record as it grows (at most once per recordLogEvery), so
// that a build the server's end cuts short keeps its log so far.
type recordedLog struct {
	s     *Server
	rec   *snapshotRecord
	mu    sync.Mutex
	saved time.Time // guarded by mu
}

// recordLogEvery is how often a build log being written is recorded.
const recordLogEvery = time.Second

func (l *recordedLog) Write(p []byte) (int, error) {
	n, err := l.rec.log.Write(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.saved) >= recordLogEvery {
		l.saved = now
		l.s.snapshots.mu.Lock()
		l.s.saveSnapshot(l.rec)
		l.s.snapshots.mu.Unlock()
	}
	return n, err
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
