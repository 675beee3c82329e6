package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// An imageEngine is an engine with an image store that builds images
// from Dockerfiles: what snapshots and creates from buildInfo need. The
// local engine is one; an engine that is not gets 501 for them.
type imageEngine interface {
	// build builds job.dockerfile (its content; a build context without
	// files) into an image named job.name, writing the build's progress
	// and the output of its RUN steps to logs. The images its FROM and
	// COPY --from name are those job.org may use (tenancy.go).
	build(ctx context.Context, job buildJob, logs io.Writer) (imageInfo, error)
	// images lists the images and snapshots of the store.
	images(ctx context.Context) ([]imageInfo, error)
	// untag takes name off its image, removing the image when it was
	// its last name; the error matches sandbox.ErrNotFound when no image
	// has it.
	untag(ctx context.Context, name string) error
}

// buildJob is one build of organization org.
type buildJob struct {
	org, dockerfile, name string
	pol                   *imagePolicy
}

// imageInfo is what the server shows of an image of the engine's store.
type imageInfo struct {
	names      []string
	size       int64 // bytes
	entrypoint []string
	created    time.Time
}

// imageStore returns s's engine as an imageEngine, or the 501 error saying
// that what needs one is not available.
func (s *Server) imageStore(what string) (imageEngine, error) {
	if ie, ok := s.baseEngine().(imageEngine); ok {
		return ie, nil
	}
	return nil, errorf(http.StatusNotImplemented, "agentbox serve does not support %s with this engine", what)
}

func infoOf(img *image.Image) imageInfo {
	return imageInfo{names: img.Names, size: img.Size, entrypoint: img.Config.Entrypoint, created: img.Created}
}

func (e localEngine) build(ctx context.Context, job buildJob, logs io.Writer) (imageInfo, error) {
	b, err := local.NewImageBuilder(e.stateDir, image.PullOptions{RegistryOnly: true})
	if err != nil {
		return imageInfo{}, err
	}
	st, err := local.OpenImageStore(e.stateDir)
	if err != nil {
		return imageInfo{}, err
	}
	// The builder's own resolution (names, ids, the operator's
	// credentials) is replaced by the organization's.
	b.Store = tenantStore{Store: b.Store, st: st, org: job.org, pol: job.pol}
	// Each organization has a step cache of its own: a step another
	// organization ran is run again, so that nobody learns from a
	// " ---> Using cache" what another built.
	b.CacheDir = filepath.Join(st.Dir(), "build-cache", "orgs", orgDirName(job.org))
	dockerfile, name := job.dockerfile, job.name
	dir, err := os.MkdirTemp("", "agentbox-serve-build-")
	if err != nil {
		return imageInfo{}, err
	}
	defer os.RemoveAll(dir)
	contextDir, file := filepath.Join(dir, "context"), filepath.Join(dir, "Dockerfile")
	if err := os.Mkdir(contextDir, 0o700); err != nil {
		return imageInfo{}, err
	}
	if err := os.WriteFile(file, []byte(dockerfile), 0o600); err != nil {
		return imageInfo{}, err
	}
	img, err := b.Build(ctx, build.Options{ContextDir: contextDir, Dockerfile: file, Names: []string{name}, Logs: logs})
	if err != nil {
		return imageInfo{}, err
	}
	return infoOf(img), nil
}

// orgDirName is the folder name of organization org's files: a digest,
// as organization names are the operator's to choose.
func orgDirName(org string) string {
	sum := sha256.Sum256([]byte(org))
	return hex.EncodeToString(sum[:12])
}

func (e localEngine) images(ctx context.Context) ([]imageInfo, error) {
	st, err := local.OpenImageStore(e.stateDir)
	if err != nil {
		return nil, err
	}
	imgs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]imageInfo, len(imgs))
	for i, img := range imgs {
		out[i] = infoOf(img)
	}
	return out, nil
}

func (e localEngine) untag(ctx context.Context, name string) error {
	st, err := local.OpenImageStore(e.stateDir)
	if err != nil {
		return err
	}
	err = st.Untag(ctx, name)
	if errors.Is(err, image.ErrNotFound) {
		return fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	}
	return err
}
