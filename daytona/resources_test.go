package daytona

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/spectest"
)

// snapshotJSON is a SnapshotDto as Daytona answers it, with a field this
// package does not know.
func snapshotJSON(state string) map[string]any {
	return map[string]any{
		"id": "snap-1", "general": false, "name": "py", "imageName": "python:3.12", "state": state, "size": 1.5,
		"entrypoint": []string{"sleep", "infinity"}, "cpu": 1, "gpu": 0, "mem": 1, "disk": 3, "errorReason": nil,
		"createdAt": "2026-11-30T21:00:00.000Z", "updatedAt": "2026-11-30T21:00:00.000Z", "lastUsedAt": nil,
		"sourceSandboxId": nil, "somethingNew": map[string]any{"x": 1},
	}
}

// TestSnapshots checks the snapshot calls against a stand-in of Daytona's
// API (agentbox serve has its own snapshot tests), every exchange checked
// against api.json on both sides; decoding tolerates unknown fields.
func TestSnapshots(t *testing.T) {
	noDaytonaEnv(t)
	cp := spectest.LoadControlPlane(t).WithBasePath("/api")
	var looks atomic.Int32
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	var base string
	mux.HandleFunc("GET /api/snapshots/{id}", func(w http.ResponseWriter, r *http.Request) {
		state := "building"
		if looks.Add(1) > 1 {
			state = "active"
		}
		writeJSON(w, snapshotJSON(state))
	})
	mux.HandleFunc("GET /api/snapshots", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "py" || r.URL.Query().Get("page") != "1" {
			t.Errorf("list query %s", r.URL.RawQuery)
		}
		writeJSON(w, map[string]any{"items": []any{snapshotJSON("inactive")}, "total": 1, "page": 1, "totalPages": 1})
	})
	mux.HandleFunc("POST /api/snapshots", func(w http.ResponseWriter, r *http.Request) {
		var req CreateSnapshot
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name != "py" || req.BuildInfo == nil {
			t.Errorf("create body %+v, %v", req, err)
		}
		writeJSON(w, snapshotJSON("pending"))
	})
	mux.HandleFunc("GET /api/snapshots/{id}/build-logs-url", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"url": base + "/logs/snap-1"})
	})
	mux.HandleFunc("GET /logs/snap-1", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "true" {
			t.Errorf("build logs not followed: %s", r.URL.RawQuery)
		}
		w.Write([]byte("Step 1/1 : FROM python:3.12\nDone\n"))
	})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/logs/") { // no document describes the log stream
			mux.ServeHTTP(w, r)
			return
		}
		cp.Handler(t, mux).ServeHTTP(w, r)
	}))
	defer hs.Close()
	base = hs.URL
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	checked := cp.Transport(t, tr)
	// No document describes the build log stream.
	split := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasPrefix(r.URL.Path, "/logs/") {
			return tr.RoundTrip(r)
		}
		return checked.RoundTrip(r)
	})
	c, err := NewClient(Config{APIKey: testKey, APIURL: hs.URL + "/api", HTTPClient: &http.Client{Transport: split}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	created, err := c.CreateSnapshot(ctx, CreateSnapshot{Name: "py", BuildInfo: &CreateBuildInfo{DockerfileContent: "FROM python:3.12\n"}})
	if err != nil || created.State != SnapshotPending || created.ID != "snap-1" {
		t.Fatalf("create: %+v, %v", created, err)
	}
	var logs strings.Builder
	if err := c.SnapshotBuildLogs(ctx, created.ID, &logs); err != nil || logs.String() != "Step 1/1 : FROM python:3.12\nDone\n" {
		t.Fatalf("build logs %q, %v", logs.String(), err)
	}
	active, err := c.WaitForSnapshot(ctx, "py")
	if err != nil || active.State != SnapshotActive || len(active.Entrypoint) != 2 {
		t.Fatalf("wait: %+v, %v", active, err)
	}
	page, err := c.ListSnapshots(ctx, "py", 1, 0)
	if err != nil || len(page.Items) != 1 || page.Items[0].State != SnapshotInactive {
		t.Fatalf("list: %+v, %v", page, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLenientDecoding: fields and enumeration values this package does not
// know decode as they are, as Daytona adds them.
func TestLenientDecoding(t *testing.T) {
	var sb SandboxDTO
	body := `{"id":"a","state":"hibernating","cpu":2.5,"brandNew":{"x":[1]},"labels":{"k":"v"},"toolboxProxyUrl":"http://x/toolbox"}`
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.State != "hibernating" || sb.CPU != 2.5 || sb.State.Failed() || sb.State.Transitional() {
		t.Fatalf("%+v, %v", sb, err)
	}
	var snap Snapshot
	if err := json.Unmarshal([]byte(`{"id":"s","state":"teleporting","extra":true}`), &snap); err != nil || snap.State != "teleporting" {
		t.Fatalf("%+v, %v", snap, err)
	}
}
