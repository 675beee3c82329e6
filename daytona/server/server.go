package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// Defaults of Options.
const (
	// DefaultOrganizationID is the organization every sandbox belongs to
	// when Options.OrganizationID is empty.
	DefaultOrganizationID = "agentbox"
	// DefaultSnapshot is the snapshot the server creates sandboxes from,
	// named in /config: the local engine's root built from the host's
	// system folders.
	DefaultSnapshot = "agentbox-host"
	// DefaultUser is the user sandboxes present, as Daytona's do.
	DefaultUser = "daytona"
	// DefaultTarget is the target (region) of sandboxes created without one.
	DefaultTarget = "local"
)

// defaultReconcileInterval is how often the server looks at running
// sandboxes (stopped behind its back, idle past their auto-stop interval)
// and stopped ones (past their auto-delete interval).
const defaultReconcileInterval = time.Second

// Options configures a Server. The zero value is valid.
type Options struct {
	// StateDir is the local engine's state dir the sandboxes live in,
	// and the server's records (serve/records.db). Default:
	// local.DefaultStateDir().
	StateDir string
	// APIKeys are bearer tokens the server accepts, of OrganizationID,
	// besides the keys of the records (CreateAPIKey). None at all: every
	// request is accepted (listen on loopback only then). Only their
	// SHA-256 hashes are kept.
	APIKeys []string
	// OrganizationID is the organization of APIKeys, and of every request
	// when the server has no keys. Default: DefaultOrganizationID.
	OrganizationID string
	// PublicURL is the server's URL as clients reach it (scheme, host,
	// port; e.g. "http://127.0.0.1:3000"), from which the toolbox proxy
	// URL of every sandbox is made. Default: "http://" and the Host of each
	// request.
	PublicURL string
	// Logf logs what clients are not told (the causes of 500 answers,
	// failures of background work). Default: nothing is logged.
	Logf func(format string, args ...any)
	// Knobs are test knobs (knobs.go): injected latency and faults,
	// request counts. Nil: none.
	Knobs *Knobs
	// PoolSize is how many sandbox inits the server keeps started ahead
	// of time (a local.Pool), so that creating a sandbox takes about half
	// the time. 0: none. Needs root.
	PoolSize int
	// PublishedImages name images of the local engine's store (as the
	// store names them) every organization may use: as snapshots, in
	// FROM and COPY --from. The store's other images are the operator's
	// and no tenant sees them.
	PublishedImages []string
	// AllowRegistries are registries (HOST or HOST:PORT, as written in
	// image references) that builds may pull from although they are on
	// loopback or private addresses; every other pull goes to public
	// addresses only.
	AllowRegistries []string
	// BuildTimeout bounds each build (of a snapshot, of a sandbox from
	// buildInfo). Default: DefaultBuildTimeout.
	BuildTimeout time.Duration
	// MaxBuilds is how many builds run at once, of all organizations
	// (each organization runs one at a time). Default: 4.
	MaxBuilds int
	// MaxSandboxesPerOrg is how many sandboxes (of any state) one
	// organization may have; a create past it is 403. Default:
	// DefaultMaxSandboxesPerOrg; negative: no limit.
	MaxSandboxesPerOrg int
	// MaxQueuedBuildsPerOrg is how many builds (of snapshots, of
	// sandboxes from buildInfo) one organization may have waiting or
	// running at once; the next is 429. Default:
	// DefaultMaxQueuedBuildsPerOrg; negative: no limit.
	MaxQueuedBuildsPerOrg int
	// MaxImageBytesPerOrg is how much of the image store one
	// organization's images (snapshots, pulls, sandboxes' builds) may
	// take before its next build is refused with 403. Default:
	// DefaultMaxImageBytesPerOrg; negative: no limit.
	MaxImageBytesPerOrg int64
	// PreviewDomain, when set, makes preview URLs host-based,
	// http://{port}-{sandboxId}.{PreviewDomain} (the server's port added
	// when it has none), for operators whose wildcard DNS sends those
	// names to the server. Default: each previewed port gets a listener
	// of its own on the address its client came in on, whose URL
	// resolves anywhere (previewlisten.go).
	PreviewDomain string
}

// DefaultMaxSandboxesPerOrg is an organization's quota of sandboxes when
// Options.MaxSandboxesPerOrg is 0.
const DefaultMaxSandboxesPerOrg = 64

// DefaultBuildTimeout is how long a build may take when
// Options.BuildTimeout is 0.
const DefaultBuildTimeout = 30 * time.Minute

// errBuildTimeout is why a build that took longer than d failed.
func errBuildTimeout(d time.Duration) error {
	return fmt.Errorf("the build took longer than %v, the limit of this server: make it shorter", d)
}

// Server is Daytona's control plane over local sandboxes: an http.Handler
// (see the package documentation for its routes). Its methods are safe for
// concurrent use.
type Server struct {
	// secretLocks order the hand-overs of each sandbox's secrets.
	secretLocks secretLocks
	org         string
	publicURL   string
	keys        []apiKey // of Options.APIKeys
	// stored are the keys of the keys file, which change while the
	// server runs; keyed is set when the server had keys when it
	// started: it then refuses every request once none is left.
	stored  *keySet
	keyed   bool
	store   *store
	logf    func(string, ...any)
	knobs   *knobs // nil: no test knobs
	eng     engine
	mux     *http.ServeMux
	proxy   *toolboxProxy
	preview *httputil.ReverseProxy
	// previews are the preview connections previewTransport makes.
	previews         previewConns
	previewTransport *http.Transport
	events           hub
	now              func() time.Time
	tick             time.Duration
	// pingInterval is the event stream's heartbeat.
	pingInterval time.Duration
	// connectWithin is how long an event stream may go without a
	// CONNECT carrying a valid key before it is closed.
	connectWithin time.Duration
	// writesUnderLock makes every record's write end before s.mu is
	// released, as the server did before its writes were grouped: the
	// baseline of BenchmarkServeLoad. Set by tests only.
	writesUnderLock bool
	// noWriteAhead lets a create reach the engine before its record is
	// on disk (awaitRecord): the benchmarks' baseline of write-ahead.
	noWriteAhead bool
	// noTrail makes the toolbox proxy record nothing in the activity
	// trail: the benchmarks' baseline (activity_bench_test.go).
	noTrail bool

	// ctx is the context of lifecycle operations, cancelled when Close
	// gives up waiting for them; timers ends the reconciler.
	ctx          context.Context
	cancel       context.CancelFunc
	timers       context.Context
	cancelTimers context.CancelFunc
	wg           sync.WaitGroup // background work: operations and the reconciler

	mu     sync.Mutex
	byID   map[string]*record
	byName map[string]*record
	signed map[string]signedPreview // signed preview URLs' tokens
	// volumes by id and by name
	volumes, volumesByName map[string]*volumeRecord
	closing                bool // Close was called: no new operation starts

	snapshots snapshotSet // guarded by its own mutex
	// pol is what tenants' images may be made of; buildTimeout bounds
	// each build.
	pol          imagePolicy
	buildTimeout time.Duration
	// maxSandboxes is an organization's quota of sandboxes (0: none).
	maxSandboxes int
	// builds counts each organization's builds against its quota;
	// maxImageBytes is its quota of image bytes (0: none).
	builds        buildQuota
	maxImageBytes int64
	// cop is the cross-origin protection of state-changing requests.
	cop *http.CrossOriginProtection

	pool *local.Pool // of Options.PoolSize; closed by Close
	// warm are the warm pools (warmpool.go).
	warm warmPools

	// previewDomainOpt is Options.PreviewDomain.
	previewDomainOpt string

	// secrets are the organizations' secrets (secretstore.go).
	secrets secretSet

	// dash are the dashboard's sessions (dashboardauth.go).
	dash dashSessions

	// metrics is the sandboxes' metrics history (metrics.go).
	metrics metricsSet
}

// New returns a Server over the local engine's sandboxes in
// opts.StateDir. Close it to end its background work; the sandboxes keep
// running.
func New(opts Options) (*Server, error) {
	if opts.StateDir == "" {
		dir, err := local.DefaultStateDir()
		if err != nil {
			return nil, fmt.Errorf("agentbox serve: %w", err)
		}
		opts.StateDir = dir
	}
	if err := local.CheckStateDir(opts.StateDir); err != nil {
		return nil, fmt.Errorf("agentbox serve: %w", err)
	}
	eng := localEngine{stateDir: opts.StateDir}
	if opts.PoolSize != 0 {
		p, err := local.NewPool(local.PoolOptions{StateDir: opts.StateDir, Size: opts.PoolSize})
		if err != nil {
			return nil, fmt.Errorf("agentbox serve: %w", err)
		}
		eng.pool = p
	}
	s, err := newServer(opts, eng, defaultReconcileInterval, time.Now)
	if err != nil {
		if eng.pool != nil {
			_ = eng.pool.Close()
		}
		return nil, err
	}
	if p := eng.pool; p != nil {
		s.pool = p
		s.wg.Go(func() {
			if err := p.Fill(s.timers); err != nil && s.timers.Err() == nil {
				s.logf("agentbox serve: starting the pool's spare inits: %v", err)
			}
		})
	}
	return s, nil
}

// newServer returns a Server running its sandboxes on eng, looking at them
// every tick, reading the time from now.
func newServer(opts Options, eng engine, tick time.Duration, now func() time.Time) (*Server, error) {
	s := &Server{
		org:              opts.OrganizationID,
		publicURL:        strings.TrimSuffix(opts.PublicURL, "/"),
		logf:             opts.Logf,
		eng:              eng,
		now:              now,
		tick:             tick,
		pingInterval:     defaultPingInterval,
		connectWithin:    defaultConnectWithin,
		byID:             map[string]*record{},
		byName:           map[string]*record{},
		signed:           map[string]signedPreview{},
		volumes:          map[string]*volumeRecord{},
		volumesByName:    map[string]*volumeRecord{},
		previewDomainOpt: opts.PreviewDomain,
	}
	s.eng = secretApplier{engine: eng, s: s} // secretsandbox.go
	if s.org == "" {
		s.org = DefaultOrganizationID
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	s.pol = imagePolicy{published: slices.Clone(opts.PublishedImages), allowRegistries: slices.Clone(opts.AllowRegistries), logf: s.logf}
	s.buildTimeout = cmp.Or(opts.BuildTimeout, DefaultBuildTimeout)
	s.maxSandboxes = max(cmp.Or(opts.MaxSandboxesPerOrg, DefaultMaxSandboxesPerOrg), 0)
	s.builds.max = max(cmp.Or(opts.MaxQueuedBuildsPerOrg, DefaultMaxQueuedBuildsPerOrg), 0)
	s.maxImageBytes = max(cmp.Or(opts.MaxImageBytesPerOrg, DefaultMaxImageBytesPerOrg), 0)
	s.cop = http.NewCrossOriginProtection()
	s.snapshots.maxBuilds = opts.MaxBuilds
	if err := checkPreviewDomain(opts.PreviewDomain); err != nil {
		return nil, err
	}
	kn, err := newKnobs(opts.Knobs)
	if err != nil {
		return nil, err
	}
	s.knobs = kn
	for i, k := range opts.APIKeys {
		if k == "" {
			return nil, fmt.Errorf("agentbox serve: API key %d is empty", i+1)
		}
		s.keys = append(s.keys, apiKey{hash: sha256.Sum256([]byte(k)), org: s.org})
	}
	if opts.StateDir == "" {
		return nil, errors.New("agentbox serve: no state dir for the records")
	}
	st, err := openStore(opts.StateDir)
	if err != nil {
		return nil, err
	}
	s.store = st
	if err := s.openSecrets(opts.StateDir); err != nil {
		_ = st.close()
		return nil, err
	}
	s.stored = &keySet{path: keysPath(opts.StateDir), logf: s.logf}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.timers, s.cancelTimers = context.WithCancel(s.ctx)
	s.proxy = newToolboxProxy(s)
	s.previewTransport = newPreviewTransport(&s.previews, s.eng)
	s.preview = newPreviewProxy(s)
	s.mux = s.routes()
	err = moveStoredKeys(context.Background(), st, opts.StateDir)
	if err == nil {
		err = s.stored.load()
	}
	if err == nil {
		s.keyed = len(s.keys)+len(s.stored.keys) > 0
		err = s.restore(s.ctx)
	}
	if err == nil {
		err = s.startWarmPools(s.ctx)
	}
	if err != nil {
		_ = s.Close(context.Background())
		return nil, err
	}
	s.wg.Add(1)
	go s.reconcileLoop()
	s.wg.Go(s.sampleLoop) // metrics.go
	// The local engine's secrets of started sandboxes, again from the
	// records, with their current values.
	s.wg.Go(func() { s.reapply(s.timers, nil) })
	return s, nil
}

// Close ends the server's background work: it stops its timers, refuses
// new lifecycle operations (503) and waits for those in flight to end,
// until ctx is done; then it cancels them and returns ctx's error once
// they have returned. Sandboxes keep running. Close does not stop serving:
// shut the http.Server down first.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.cancelTimers()
	defer s.proxy.close()
	defer s.store.close()
	defer s.previewTransport.CloseIdleConnections()
	defer s.previews.listeners.closeAll()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		if s.pool != nil {
			if err := s.pool.Close(); err != nil {
				s.logf("agentbox serve: closing the pool: %v", err)
			}
		}
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel()
		<-done
		return fmt.Errorf("agentbox serve: lifecycle operations in flight cancelled: %w", context.Cause(ctx))
	}
}

// ServeHTTP implements http.Handler. A request whose host is a preview
// URL's goes to the sandbox's port; every other to the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	port, key, isPreview := parsePreviewHost(r.Host)
	if !s.guard(w, r, isPreview) {
		return
	}
	if s.knobs != nil {
		// Knobs act on authenticated requests only: a request without
		// a valid key is neither delayed, nor counted, nor faulted, and
		// cannot stop or delete anything.
		if org, ok := s.requestOrg(r); ok {
			var goOn bool
			if w, goOn = s.applyKnobs(w, r, org); !goOn {
				return
			}
		}
	}
	if isPreview {
		if err := s.servePreview(w, r, port, key); err != nil {
			writeError(w, r, err, s.logf)
		}
		return
	}
	s.mux.ServeHTTP(w, r)
}

// handlerFunc is a handler that returns its error for the caller to answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// routes returns the server's router.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	api := func(pattern string, h handlerFunc) { mux.Handle(pattern, s.handle(s.trailed(pattern, h), true)) }
	mux.Handle("GET /api/config", s.handle(s.getConfig, false))
	// The key comes in the stream's CONNECT packet.
	mux.Handle("GET /api/socket.io/", s.handle(s.serveEvents, false))
	api("POST /api/sandbox", s.createSandbox)
	api("GET /api/sandbox", s.listSandboxes)
	api("GET /api/sandbox/paginated", s.listSandboxesPaginated)
	api("GET /api/sandbox/{id}", s.getSandbox)
	api("DELETE /api/sandbox/{id}", s.lifecycleCall(s.beginDestroy))
	api("POST /api/sandbox/{id}/start", s.lifecycleCall(s.beginStart))
	api("POST /api/sandbox/{id}/stop", s.stopSandbox)
	api("POST /api/sandbox/{id}/archive", s.lifecycleCall(s.beginArchive))
	api("POST /api/sandbox/{id}/recover", s.recoverSandbox)
	api("PUT /api/sandbox/{id}/labels", s.replaceLabels)
	api("POST /api/sandbox/{id}/autostop/{interval}", s.setInterval(func(rec *record, v int) { rec.autoStop = v }, 0))
	api("POST /api/sandbox/{id}/autoarchive/{interval}", s.setInterval(func(rec *record, v int) { rec.autoArchive = v }, 0))
	api("POST /api/sandbox/{id}/autodelete/{interval}", s.setInterval(func(rec *record, v int) { rec.autoDelete = v }, -1))
	api("POST /api/sandbox/{id}/public/{isPublic}", s.setPublic)
	s.lifecycleRoutes(api)
	s.secretRoutes(api)
	s.metricsRoutes(api)
	api("POST /api/sandbox/{id}/network-settings", s.updateNetwork)
	api("GET /api/sandbox/{id}/toolbox-proxy-url", s.getToolboxProxyURL)
	api("POST /api/volumes", s.createVolume)
	api("GET /api/volumes", s.listVolumes)
	api("GET /api/volumes/{id}", s.getVolume)
	api("GET /api/volumes/by-name/{name}", s.getVolume)
	api("DELETE /api/volumes/{id}", s.deleteVolume)
	api("POST /api/sandbox/{id}/resize", s.resizeSandbox)
	api("GET /api/sandbox/{id}/build-logs-url", s.getBuildLogsURL)
	api("GET /api/sandbox/{id}/build-logs", s.getBuildLogs)
	api("POST /api/snapshots", s.createSnapshot)
	api("GET /api/snapshots", s.listSnapshots)
	api("GET /api/snapshots/{id}", s.getSnapshot)
	api("DELETE /api/snapshots/{id}", s.deleteSnapshot)
	api("POST /api/snapshots/{id}/activate", s.setSnapshotActive(true))
	api("POST /api/snapshots/{id}/deactivate", s.setSnapshotActive(false))
	api("GET /api/snapshots/{id}/build-logs-url", s.getSnapshotBuildLogsURL)
	api("GET /api/snapshots/{id}/build-logs", s.getSnapshotBuildLogs)
	api("GET /api/object-storage/push-access", pushAccess)
	api("GET /api/warm-pools", s.listWarmPools)
	api("POST /api/warm-pools", s.createWarmPool)
	api("PATCH /api/warm-pools/{id}", s.updateWarmPool)
	api("DELETE /api/warm-pools/{id}", s.deleteWarmPool)
	api("GET /api/sandbox/{id}/ports/{port}/preview-url", s.getPreviewURL)
	api("GET /api/sandbox/{id}/ports/{port}/signed-preview-url", s.getSignedPreviewURL)
	api("POST /api/sandbox/{id}/ports/{port}/signed-preview-url/{token}/expire", s.expireSignedPreviewURL)
	// The proxy checks the key itself: it also takes the sandbox's preview token.
	mux.Handle("/api/toolbox/{id}/toolbox/{path...}", s.handle(s.proxy.serve, false))
	mux.Handle("/toolbox/{id}/{path...}", s.handle(s.proxy.serve, false))
	s.dashboardRoutes(mux)
	mux.Handle("/", s.handle(notFound, false))
	return mux
}

// handle adapts h: it answers h's error, after checking the API key when
// auth is set (the key's organization is then the request's, orgOf).
func (s *Server) handle(h handlerFunc, auth bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth {
			org, ok := s.requestOrg(r)
			if !ok {
				writeError(w, r, errorf(http.StatusUnauthorized, "Unauthorized: send a valid API key as Authorization: Bearer KEY"), nil)
				return
			}
			r = withOrg(r, org)
		}
		if err := h(w, r); err != nil {
			writeError(w, r, err, s.logf)
		}
	})
}

// notFound answers routes the server does not have as NestJS does.
func notFound(_ http.ResponseWriter, r *http.Request) error {
	return errorf(http.StatusNotFound, "Cannot %s %s", r.Method, r.URL.Path)
}

// baseURL returns the server's URL as the client of r reaches it.
func (s *Server) baseURL(r *http.Request) string {
	if s.publicURL != "" {
		return s.publicURL
	}
	return "http://" + r.Host
}

// toolboxProxyURL returns the toolbox proxy URL of every sandbox.
func (s *Server) toolboxProxyURL(r *http.Request) string { return s.baseURL(r) + "/toolbox" }

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) error {
	base := s.baseURL(r)
	host := strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
	writeJSON(w, configuration{
		Version:                "agentbox",
		ProxyTemplateURL:       "http://{{PORT}}-{{sandboxId}}." + host,
		ProxyToolboxURL:        base + "/toolbox",
		DefaultSnapshot:        DefaultSnapshot,
		DashboardURL:           base,
		MaxAutoArchiveInterval: maxAutoArchiveInterval,
		Environment:            "agentbox",
	})
	return nil
}

// maxAutoArchiveInterval is the longest auto-archive interval in minutes
// (30 days, self-hosted Daytona's default), which 0 means.
const maxAutoArchiveInterval = 43200

// errClosed is the error of lifecycle calls after Close.
var errClosed = errors.New("agentbox serve is shutting down")
