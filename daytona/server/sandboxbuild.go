package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sandboxes created from buildInfo (Daytona's "image" creates: the SDKs
// send dockerfileContent "FROM IMAGE\n", or a declarative image's
// Dockerfile): the local image builder builds the Dockerfile into an
// image of the store named for its content (sandboxBuildPrefix), which
// the sandbox is then made of, going through Daytona's states:
// pending_build (waiting for the build slot) → building_snapshot →
// starting → started, or build_failed. The build's log is served at
// GET /sandbox/{id}/build-logs (?follow=true streams it until the build
// ends), the URL GET /sandbox/{id}/build-logs-url gives.

// sandboxBuild is the build of a sandbox created from buildInfo.
type sandboxBuild struct {
	info      createBuildInfo
	ref       string // the image built
	log       *buildLog
	createdAt time.Time
	// release ends the build's count against its organization's quota.
	release func()
}

// dto returns the sandbox's buildInfo; nil when it has none.
func (b *sandboxBuild) dto() *buildInfoDTO {
	if b == nil {
		return nil
	}
	at := b.createdAt.UTC().Format(timeLayout)
	return &buildInfoDTO{DockerfileContent: b.info.DockerfileContent, ContextHashes: []string{}, SnapshotRef: b.ref, CreatedAt: at, UpdatedAt: at}
}

// A buildError is the failure of a sandbox's build: it ends in
// build_failed rather than error.
type buildError struct{ err error }

func (e *buildError) Error() string { return "building the image: " + e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

// failedState is the state a sandbox whose operation failed with err
// ends in.
func failedState(err error) string {
	if errors.As(err, new(*buildError)) {
		return stateBuildFail
	}
	return stateError
}

// prepareCreate returns the function that creates and starts the sandbox
// of rec with sp, as the request req asks: made of a snapshot (checked
// now), or of the image its buildInfo builds first.
func (s *Server) prepareCreate(ctx context.Context, rec *record, sp spec, req *createSandbox) (func(context.Context) (sizes, error), error) {
	if bi := req.BuildInfo; bi != nil {
		if req.Snapshot != "" {
			return nil, errorf(http.StatusBadRequest, "give either snapshot or buildInfo, not both")
		}
		return s.prepareBuild(ctx, rec, sp, bi)
	}
	if sp.image != "" {
		v, snap, err := s.usableSnapshot(ctx, rec.org, sp.image)
		if err != nil {
			return nil, err
		}
		rec.snapshot, sp.image = v.name, v.storeName
		// A snapshot's sizes are those of its sandboxes, unless asked.
		for _, res := range []struct {
			from int
			got  *float64
		}{{snap.cpu, &rec.sizes.cpu}, {snap.mem, &rec.sizes.memoryGiB}, {snap.disk, &rec.sizes.diskGiB}} {
			if *res.got == 0 && res.from > 0 {
				*res.got = float64(res.from)
			}
		}
		sp.resources = rec.sizes.resources()
		ok, err := s.eng.hasImage(ctx, sp.image)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errorf(http.StatusBadRequest, "Snapshot %s not found: pull, build or snapshot it first (agentbox image pull|build, agentbox snapshot create, POST /api/snapshots)", sp.image)
		}
	}
	start, err := s.eng.create(rec.id, sp)
	if err != nil {
		return nil, engineError(err)
	}
	return start, nil
}

// prepareBuild returns the function that builds bi and then creates and
// starts rec's sandbox of the image built, moving rec through the build's
// states.
func (s *Server) prepareBuild(ctx context.Context, rec *record, sp spec, bi *createBuildInfo) (func(context.Context) (sizes, error), error) {
	if err := checkBuildInfo(bi); err != nil {
		return nil, err
	}
	ie, err := s.imageStore("images and buildInfo")
	if err != nil {
		return nil, err
	}
	views, err := s.snapshotViews(ctx, rec.org)
	if err != nil {
		return nil, err
	}
	if err := s.checkDockerfileRefs(rec.org, bi.DockerfileContent, views); err != nil {
		return nil, err
	}
	release, err := s.reserveBuild(ctx, ie, rec.org)
	if err != nil {
		return nil, err
	}
	b := &sandboxBuild{info: *bi, ref: sandboxBuildName(rec.org, bi.DockerfileContent), log: &buildLog{}, createdAt: s.now(), release: release}
	rec.build, rec.snapshot, sp.image = b, b.ref, b.ref
	moveTo := func(state string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.set(rec, state, "")
	}
	return func(ctx context.Context) (sizes, error) {
		err := s.buildFor(ctx, rec.org, ie, b, moveTo)
		b.release()
		if err != nil {
			return sizes{}, &buildError{err}
		}
		moveTo(stateStarting)
		start, err := s.eng.create(rec.id, sp)
		if err != nil {
			return sizes{}, err
		}
		return start(ctx)
	}, nil
}

// buildFor builds b's image in its turn, logging to b's log, which it
// closes.
func (s *Server) buildFor(ctx context.Context, org string, ie imageEngine, b *sandboxBuild, moveTo func(state string)) error {
	defer b.log.close()
	release, err := s.snapshots.takeSlot(ctx, org)
	if err != nil {
		return err
	}
	defer release()
	moveTo(stateBuildingSnapshot)
	bctx, cancel := context.WithTimeoutCause(ctx, s.buildTimeout, errBuildTimeout(s.buildTimeout))
	defer cancel()
	job := buildJob{org: org, dockerfile: b.info.DockerfileContent, name: b.ref, pol: &s.pol}
	if _, err := ie.build(bctx, job, b.log); err != nil {
		if ctx.Err() == nil && bctx.Err() != nil {
			err = context.Cause(bctx)
		}
		fmt.Fprintf(b.log, "Build failed: %v\n", err)
		return err
	}
	return nil
}

func (s *Server) getBuildLogsURL(w http.ResponseWriter, r *http.Request) error {
	return s.withSandbox(func(r *http.Request, rec *record) (any, error) {
		if rec.build == nil {
			return nil, errNoBuild(rec)
		}
		return toolboxProxyURL{URL: s.baseURL(r) + "/api/sandbox/" + rec.id + "/build-logs"}, nil
	})(w, r)
}

func (s *Server) getBuildLogs(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	if err == nil && rec.build == nil {
		err = errNoBuild(rec)
	}
	var log *buildLog
	if err == nil {
		log = rec.build.log
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return serveBuildLog(w, r, log)
}

// errNoBuild is the error of the build logs of a sandbox without a build.
func errNoBuild(rec *record) error {
	return errorf(http.StatusNotFound, "Sandbox %s has no build logs: it was created from a snapshot, not from buildInfo", rec.name)
}
