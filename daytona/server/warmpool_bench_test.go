package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
)

// benchAPI calls serve's API at base as the benchmarks do, failing b on
// an answer other than want.
func benchAPI(b *testing.B, c *http.Client, base, method, path string, body, out any, want int) {
	b.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, base+"/api"+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmPoolCreate measures a create of a snapshot's sandbox, from
// the POST until serve says it is started, over the local engine: without
// a warm pool (the baseline), then with a warm pool of one spare (the
// create takes it; its refill is waited for outside the timer). Each
// sandbox is deleted outside the timer.
func BenchmarkWarmPoolCreate(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the local engine's default network")
	}
	dir := b.TempDir()
	st, err := local.OpenImageStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	testrootfs.SaveImage(b, st, warmSnapshot)
	s, err := newServer(Options{StateDir: dir, PublishedImages: []string{warmSnapshot}}, localEngine{stateDir: dir}, 50*time.Millisecond, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer func() {
		srv.Close()
		s.Close(context.Background())
		localtest.CheckNoneLeft(b, dir)
	}()
	c := srv.Client()
	wait := func(id, want string) {
		for deadline := time.Now().Add(time.Minute); ; {
			var sb apiSandbox
			req, _ := http.NewRequest("GET", srv.URL+"/api/sandbox/"+id, nil)
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			json.NewDecoder(resp.Body).Decode(&sb)
			resp.Body.Close()
			if sb.State == want || want == "gone" && resp.StatusCode == http.StatusNotFound {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("sandbox %s: %q, want %q", id, sb.State, want)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	create := func(b *testing.B, before func()) {
		for b.Loop() {
			b.StopTimer()
			before()
			b.StartTimer()
			var sb apiSandbox
			benchAPI(b, c, srv.URL, "POST", "/sandbox", map[string]any{"snapshot": warmSnapshot}, &sb, http.StatusOK)
			wait(sb.ID, stateStarted)
			b.StopTimer()
			benchAPI(b, c, srv.URL, "DELETE", "/sandbox/"+sb.ID, nil, nil, http.StatusOK)
			wait(sb.ID, "gone")
			b.StartTimer()
		}
	}
	b.Run("without-pool", func(b *testing.B) { create(b, func() {}) })
	var p warmPoolDTO
	benchAPI(b, c, srv.URL, "POST", "/warm-pools", map[string]any{"snapshot": warmSnapshot, "pool": 1}, &p, http.StatusCreated)
	ready := func() {
		for deadline := time.Now().Add(time.Minute); ; {
			var ps []warmPoolDTO
			benchAPI(b, c, srv.URL, "GET", "/warm-pools", nil, &ps, http.StatusOK)
			if len(ps) == 1 && ps[0].CurrentSize == 1 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("warm pool never refilled: %+v", ps)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	b.Run("warm-pool", func(b *testing.B) { create(b, ready) })
	benchAPI(b, c, srv.URL, "DELETE", "/warm-pools/"+p.ID, nil, nil, http.StatusNoContent)
}
