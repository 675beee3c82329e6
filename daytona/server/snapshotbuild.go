package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Creating a snapshot (POST /snapshots): the request checked and recorded,
// then built in the background, one build of an organization at a time
// and a few of all (snapshotSet.takeSlot).

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
