package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local/image"
)

// hostPathRefs are image references naming files and folders of the
// server's host, in every form the image store takes.
var hostPathRefs = []string{
	"/root/secret", "/root", "/", "./img", "../img", "img.tar", "/tmp/img.tar.gz", "img.tgz", "alpine:v.tar",
	"oci:/tmp/layout", "oci:/tmp/layout:tag", "oci:layout", "~root/img",
	"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
}

// A tenant's image references are registry references or its own
// snapshots: a host path in every form (snapshot imageName, FROM,
// COPY --from, a create's snapshot) is refused with 400 before any build
// starts; an unpublished image of the operator's store is not found.
func TestHostPathsRefused(t *testing.T) {
	eng := newImageFake(t, "team/tools:1", "operator/private:1")
	dir := t.TempDir()
	key := newOrgKey(t, dir, "a", "team-a")
	h := newHarness(t, eng, harnessOptions{stateDir: dir, published: []string{"team/tools:1"}})
	var e apiError
	for _, ref := range hostPathRefs {
		if st := h.callKey(key, "POST", "/snapshots", map[string]any{"name": "x", "imageName": ref}, &e); st != http.StatusBadRequest || !strings.Contains(e.Message, "registry references") {
			t.Errorf("snapshot of imageName %q: %d %+v, want 400", ref, st, e)
		}
		for _, df := range []string{
			"FROM " + ref + "\n",
			"FROM team/tools:1\nCOPY --from=" + ref + " /etc/passwd /p\n",
			"FROM team/tools:1 AS one\nFROM one\nCOPY --from=" + ref + " / /\n",
		} {
			bi := map[string]any{"dockerfileContent": df}
			if st := h.callKey(key, "POST", "/snapshots", map[string]any{"name": "x", "buildInfo": bi}, &e); st != http.StatusBadRequest {
				t.Errorf("snapshot of Dockerfile %q: %d %+v, want 400", df, st, e)
			}
			if st := h.callKey(key, "POST", "/sandbox", map[string]any{"buildInfo": bi}, &e); st != http.StatusBadRequest {
				t.Errorf("sandbox of Dockerfile %q: %d %+v, want 400", df, st, e)
			}
		}
		if st := h.callKey(key, "POST", "/sandbox", map[string]any{"snapshot": ref}, &e); st != http.StatusBadRequest {
			t.Errorf("sandbox of snapshot %q: %d %+v, want 400", ref, st, e)
		}
	}
	for _, ref := range []string{"operator/private:1", "index.docker.io/operator/private:1"} {
		if st := h.callKey(key, "POST", "/sandbox", map[string]any{"snapshot": ref}, &e); st != http.StatusBadRequest || !strings.Contains(e.Message, "not found") {
			t.Errorf("sandbox of the operator's unpublished image %q: %d %+v, want 400 not found", ref, st, e)
		}
	}
	if eng.builds != 0 {
		t.Fatalf("%d builds started, want none", eng.builds)
	}
	var list paginatedSnapshots
	h.callKey(key, "GET", "/snapshots", nil, &list)
	if names := snapshotNames(list); !slices.Equal(names, []string{"agentbox-host", "team/tools:1"}) {
		t.Fatalf("team-a's snapshots %v: want the default and the published image only", names)
	}
	// Stage names and build arguments are no host paths; the published
	// image is taken.
	if st := h.callKey(key, "POST", "/snapshots", map[string]any{"name": "ok", "buildInfo": map[string]any{
		"dockerfileContent": "FROM team/tools:1 AS base\nFROM base\nCOPY --from=0 /a /b\nCOPY --from=base /a /c\n"}}, &e); st != http.StatusOK {
		t.Fatalf("a multi-stage Dockerfile: %d %+v", st, e)
	}
}

// snapshotNames returns the names of list's snapshots.
func snapshotNames(list paginatedSnapshots) []string {
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	slices.Sort(names)
	return names
}

// waitSnapshotKey is waitSnapshot with key.
func (h *harness) waitSnapshotKey(key, ref, want string) snapshotDTO {
	h.t.Helper()
	for range 4000 {
		var d snapshotDTO
		if st := h.callKey(key, "GET", "/snapshots/"+ref, nil, &d); st == http.StatusOK && d.State == want {
			return d
		}
		waitABit()
	}
	h.t.Fatalf("snapshot %s never %s", ref, want)
	return snapshotDTO{}
}

// Snapshots belong to their organization: another organization does not
// see, read, activate, delete or create sandboxes of them (404, 400 for
// a create), and a name shaped like a registry reference of one
// organization is not another's.
func TestSnapshotsOfOrganizations(t *testing.T) {
	eng := newImageFake(t, "team/tools:1")
	dir := t.TempDir()
	keyA := newOrgKey(t, dir, "a", "team-a")
	keyB := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, eng, harnessOptions{stateDir: dir})
	var snap snapshotDTO
	for _, name := range []string{"mine", "python:3.12-slim"} {
		if st := h.callKey(keyA, "POST", "/snapshots", map[string]any{"name": name, "imageName": "team/tools:1"}, &snap); st != http.StatusOK || snap.OrganizationID != "team-a" {
			t.Fatalf("team-a's snapshot %s: %d %+v", name, st, snap)
		}
		h.waitSnapshotKey(keyA, name, snapshotActive)
	}
	mine := h.waitSnapshotKey(keyA, "mine", snapshotActive)
	var e apiError
	for _, c := range []struct{ method, path string }{
		{"GET", "/snapshots/mine"}, {"GET", "/snapshots/" + mine.ID}, {"GET", "/snapshots/mine/build-logs"},
		{"GET", "/snapshots/mine/build-logs-url"}, {"POST", "/snapshots/mine/deactivate"}, {"POST", "/snapshots/mine/activate"},
		{"DELETE", "/snapshots/mine"}, {"DELETE", "/snapshots/" + mine.ID}, {"GET", "/snapshots/python:3.12-slim"},
	} {
		if st := h.callKey(keyB, c.method, c.path, nil, &e); st != http.StatusNotFound {
			t.Errorf("%s %s with team-b's key: %d %+v, want 404", c.method, c.path, st, e)
		}
	}
	var list paginatedSnapshots
	h.callKey(keyB, "GET", "/snapshots", nil, &list)
	if names := snapshotNames(list); !slices.Equal(names, []string{"agentbox-host", "team/tools:1"}) {
		t.Errorf("team-b's snapshots %v", names)
	}
	for _, ref := range []string{"mine", mine.ID, "python:3.12-slim"} {
		if st := h.callKey(keyB, "POST", "/sandbox", map[string]any{"snapshot": ref}, &e); st != http.StatusBadRequest {
			t.Errorf("team-b's sandbox of team-a's snapshot %s: %d %+v, want 400", ref, st, e)
		}
	}
	// team-b's python:3.12-slim is the registry's, not team-a's build.
	h.callKey(keyB, "POST", "/snapshots", map[string]any{"name": "py", "imageName": "python:3.12-slim"}, nil)
	if got := h.waitSnapshotKey(keyB, "py", snapshotError); got.ErrorReason == nil || !strings.Contains(*got.ErrorReason, "python:3.12-slim: not found") {
		t.Errorf("team-b's snapshot of python:3.12-slim: %+v", got)
	}
	// Names are per organization; team-a's snapshots are still there.
	if st := h.callKey(keyB, "POST", "/snapshots", map[string]any{"name": "mine", "imageName": "team/tools:1"}, &snap); st != http.StatusOK || snap.ID == mine.ID {
		t.Fatalf("team-b's own snapshot mine: %d %+v", st, snap)
	}
	h.waitSnapshotKey(keyB, "mine", snapshotActive)
	if st := h.callKey(keyB, "DELETE", "/snapshots/mine", nil, nil); st != http.StatusOK {
		t.Fatalf("team-b deletes its own: %d", st)
	}
	if got := h.waitSnapshotKey(keyA, "mine", snapshotActive); got.ID != mine.ID {
		t.Fatalf("team-a's snapshot after team-b's delete: %+v", got)
	}
	// The operator's published image is no tenant's to delete.
	if st := h.callKey(keyA, "DELETE", "/snapshots/"+snapshotID("", "team/tools:1"), nil, &e); st != http.StatusForbidden || !eng.has("team/tools:1") {
		t.Errorf("a tenant deletes the published image: %d %+v, want 403", st, e)
	}
}

// A build of one organization that never ends (RUN sleep infinity) does
// not hold another organization's builds up, and ends build_failed at the
// build timeout, saying so.
func TestBuildsPerOrganization(t *testing.T) {
	eng := newImageFake(t, "team/tools:1")
	dir := t.TempDir()
	keyA := newOrgKey(t, dir, "a", "team-a")
	keyB := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, eng, harnessOptions{stateDir: dir, buildTimeout: 300 * time.Millisecond})
	h.callKey(keyA, "POST", "/snapshots", map[string]any{"name": "forever", "buildInfo": map[string]any{"dockerfileContent": "FROM team/tools:1\nRUN sleep infinity\n"}}, nil)
	h.waitSnapshotKey(keyA, "forever", snapshotBuilding)
	h.callKey(keyB, "POST", "/snapshots", map[string]any{"name": "quick", "imageName": "team/tools:1"}, nil)
	h.waitSnapshotKey(keyB, "quick", snapshotActive)
	failed := h.waitSnapshotKey(keyA, "forever", snapshotBuildFailed)
	if failed.ErrorReason == nil || !strings.Contains(*failed.ErrorReason, "the build took longer than 300ms") {
		t.Fatalf("the endless build: %+v", failed)
	}
}

// The build log keeps its last maxBuildLog bytes; a reader from the
// start is told what was dropped, and a follower's offsets go on.
func TestBuildLogBounded(t *testing.T) {
	var l buildLog
	chunk := []byte(strings.Repeat("y\n", 2048))
	for range 4 * maxBuildLog / len(chunk) {
		l.Write(chunk)
	}
	l.Write([]byte("the end\n"))
	if len(l.data) > maxBuildLog {
		t.Fatalf("the log keeps %d bytes, more than %d", len(l.data), maxBuildLog)
	}
	all, next, _, _ := l.read(0)
	if !strings.HasPrefix(string(all), "(agentbox serve: ") || !strings.HasSuffix(string(all), "y\nthe end\n") {
		t.Fatalf("the log read from its start: %.80q … %q", all, all[len(all)-20:])
	}
	if want := 4*maxBuildLog/len(chunk)*len(chunk) + len("the end\n"); next != want {
		t.Fatalf("offset after the log %d, want %d", next, want)
	}
	l.Write([]byte("more\n"))
	if rest, _, _, _ := l.read(next); string(rest) != "more\n" {
		t.Fatalf("the log after the offset: %q", rest)
	}
}

// Writes larger than the log's bound (a RUN step's output arrives in
// chunks of megabytes) keep the log's memory within twice its bound, and
// its last bytes readable.
func TestBuildLogLargeWrites(t *testing.T) {
	var l buildLog
	total := 0
	chunks := make([][]byte, 5)
	for i := range chunks {
		chunks[i] = bytes.Repeat([]byte{byte('a' + i)}, 3*maxBuildLog+i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, chunk := range chunks {
		l.Write(chunk)
		total += len(chunk)
		if c := cap(l.data); c > 2*maxBuildLog {
			t.Fatalf("after a write of %d bytes the log holds a buffer of %d bytes, want at most %d", len(chunk), c, 2*maxBuildLog)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4*maxBuildLog {
		t.Errorf("five writes of 3 MiB allocated %d bytes, want the log's one buffer (at most %d)", n, 4*maxBuildLog)
	}
	l.Write([]byte("tail\n"))
	total += 5
	all, next, _, _ := l.read(0)
	if next != total || !strings.HasSuffix(string(all), "eeee"+"tail\n") || len(all) > maxBuildLog+200 {
		t.Fatalf("the log: %d bytes, next %d (want %d), ending %q", len(all), next, total, all[len(all)-10:])
	}
}

// The resolver of a tenant's build reads no host path in any form (not
// even from a build argument the Dockerfile check does not see); it
// finds its organization's snapshot, never another's, and the CLI's
// lookups do not find a tenant's image under its tenant name.
func TestTenantStore(t *testing.T) {
	ctx := context.Background()
	st, err := image.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "secret"), []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	pol := &imagePolicy{testTransport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		asked.Add(1)
		return nil, errors.New("no network in tests")
	})}
	ts := tenantStore{st: st, org: "team-b", pol: pol}
	for _, ref := range append(hostPathRefs, secret, secret+"/", "oci:"+secret) {
		if _, err := ts.Resolve(ctx, ref); err == nil {
			t.Errorf("Resolve(%q) succeeded", ref)
		}
	}
	if imgs, _ := st.List(ctx); len(imgs) != 0 || asked.Load() != 0 {
		t.Fatalf("after host paths: %d images in the store, %d registry requests; want none", len(imgs), asked.Load())
	}

	if os.Geteuid() != 0 {
		return // importing the test image needs root
	}
	a := testrootfs.SaveImage(t, st, orgImageName("team-a", "python:3.12-slim"))
	if _, err := st.Get(ctx, "python:3.12-slim"); !errors.Is(err, image.ErrNotFound) {
		t.Errorf("the CLI's lookup of python:3.12-slim: %v, want not found", err)
	}
	if got, err := (tenantStore{st: st, org: "team-a", pol: pol}).Resolve(ctx, "python:3.12-slim"); err != nil || got.ID != a.ID {
		t.Fatalf("team-a's python:3.12-slim: %v %v", got, err)
	}
	if got, err := ts.Resolve(ctx, "python:3.12-slim"); err == nil || asked.Load() == 0 {
		t.Fatalf("team-b's python:3.12-slim: %v %v, want a pull from the registry", got, err)
	}
	for _, ref := range []string{a.ID, a.ID[7:19], orgImageName("team-a", "python:3.12-slim")} {
		if got, err := ts.Resolve(ctx, ref); err == nil {
			t.Errorf("team-b resolves team-a's image as %q: %s", ref, got.ID)
		}
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A build's pull to a loopback registry is refused, without a request,
// unless the operator allows the registry; a failed pull's error is ours,
// not the registry's answer.
func TestPullToLoopbackRefused(t *testing.T) {
	var asked atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		http.Error(w, "SECRET-REGISTRY-TEXT", http.StatusTeapot)
	}))
	defer reg.Close()
	ctx := context.Background()
	st, err := image.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(reg.URL, "http://")
	ref := host + "/team/img:1"
	_, err = tenantStore{st: st, org: "team-a", pol: &imagePolicy{}}.Resolve(ctx, ref)
	if !errors.Is(err, errPrivateAddress) || asked.Load() != 0 {
		t.Fatalf("a pull from %s: %v, %d requests; want refused, none", ref, err, asked.Load())
	}
	_, err = tenantStore{st: st, org: "team-a", pol: &imagePolicy{allowRegistries: []string{host}}}.Resolve(ctx, ref)
	if err == nil || asked.Load() == 0 || strings.Contains(err.Error(), "SECRET-REGISTRY-TEXT") {
		t.Fatalf("a pull from the allowed %s: %v, %d requests; want a request and our own error", ref, err, asked.Load())
	}
}

// waitABit pauses a polling loop.
func waitABit() { time.Sleep(5 * time.Millisecond) }
