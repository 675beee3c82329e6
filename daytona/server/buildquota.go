package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Quotas of an organization's builds: how many may wait or run at once
// (Options.MaxQueuedBuildsPerOrg, 429 past it) and how much of the image
// store its images may take (Options.MaxImageBytesPerOrg, 403 past it),
// both checked when a build is asked for, before anything is recorded.

const (
	// DefaultMaxQueuedBuildsPerOrg is how many builds of one organization
	// may wait or run at once when Options.MaxQueuedBuildsPerOrg is 0.
	DefaultMaxQueuedBuildsPerOrg = 8
	// DefaultMaxImageBytesPerOrg is how much of the image store one
	// organization's images may take when Options.MaxImageBytesPerOrg
	// is 0: 50 GiB.
	DefaultMaxImageBytesPerOrg = 50 << 30
)

// buildQuota counts the builds of each organization that wait or run.
// Its zero value has no builds; max 0 is no limit.
type buildQuota struct {
	mu     sync.Mutex
	max    int
	queued map[string]int
}

// reserve counts a build of organization org until release is called
// (more calls of release do nothing); 429 when org has as many as it
// may already.
func (q *buildQuota) reserve(org string) (release func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := q.queued[org]; q.max > 0 && n >= q.max {
		return nil, errorf(http.StatusTooManyRequests, "organization %s has %d builds waiting or running, the most this server queues (agentbox serve --max-queued-builds-per-org, now %d): wait for one to end, or ask the operator to raise the quota", org, n, q.max)
	}
	if q.queued == nil {
		q.queued = map[string]int{}
	}
	q.queued[org]++
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			if q.queued[org]--; q.queued[org] <= 0 {
				delete(q.queued, org)
			}
		})
	}, nil
}

// ownsImage reports whether the store's image name belongs to
// organization org: its snapshots, its pulls, the images of its
// sandboxes' builds.
func ownsImage(org, name string) bool {
	if rest, ok := strings.CutPrefix(name, orgImagePrefix); ok {
		return strings.HasPrefix(rest, org+":")
	}
	if rest, ok := strings.CutPrefix(name, pullImagePrefix); ok {
		return strings.HasPrefix(rest, org+":")
	}
	return false
}

// sandboxBuildRefs returns the images built for the sandboxes of
// organization org.
func (s *Server) sandboxBuildRefs(org string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []string
	for _, rec := range s.byID {
		if rec.org == org && rec.build != nil {
			refs = append(refs, rec.build.ref)
		}
	}
	return refs
}

// reserveBuild checks the quotas of organization org before a build of
// ie: its images' size, then its builds waiting or running, which it
// counts one more until release is called.
func (s *Server) reserveBuild(ctx context.Context, ie imageEngine, org string) (release func(), err error) {
	if err := s.checkImageQuota(ctx, ie, org, s.sandboxBuildRefs(org)); err != nil {
		return nil, err
	}
	return s.builds.reserve(org)
}

// checkImageQuota returns a 403 error when the images of organization
// org (each counted once, with every layer it has) take as much of ie's
// store as its quota allows.
func (s *Server) checkImageQuota(ctx context.Context, ie imageEngine, org string, sandboxBuilds []string) error {
	if s.maxImageBytes <= 0 {
		return nil
	}
	imgs, err := ie.images(ctx)
	if err != nil {
		return err
	}
	var used int64
	for _, img := range imgs {
		for _, n := range img.names {
			if ownsImage(org, n) || slices.Contains(sandboxBuilds, n) {
				used += img.size
				break
			}
		}
	}
	if used >= s.maxImageBytes {
		return errorf(http.StatusForbidden, "Image quota exceeded: the images of organization %s take %s, the most this server allows (agentbox serve --max-image-disk-per-org, now %s): delete snapshots or sandboxes first, or ask the operator to raise the quota", org, toolbox.FormatSize(used), toolbox.FormatSize(s.maxImageBytes))
	}
	return nil
}
