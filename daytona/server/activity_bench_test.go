package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// BenchmarkTrailExecute measures a command run through serve's toolbox
// proxy (POST /process/execute over the fake engine's toolbox) with the
// activity trail recording it, against the same server with the trail
// off (baseline), for a command without output and one printing 4 MiB
// (which the trail's scanner reads through). Report trail/baseline.
func BenchmarkTrailExecute(b *testing.B) {
	for _, c := range []struct{ name, command string }{
		{"quiet", "true"},
		{"4MiB", "head -c 4194304 /dev/zero | tr '\\0' a"},
	} {
		for _, mode := range []string{"baseline", "trail"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				s, err := newServer(Options{APIKeys: []string{testKey}, StateDir: b.TempDir()}, newFakeEngine(b), 5*time.Millisecond, time.Now)
				if err != nil {
					b.Fatal(err)
				}
				s.noTrail = mode == "baseline"
				srv := httptest.NewServer(s)
				b.Cleanup(func() {
					srv.Close()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = s.Close(ctx)
				})
				id := benchSandbox(b, srv)
				tc, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: srv.URL + "/toolbox/" + id, Token: testKey, HTTPClient: srv.Client()})
				if err != nil {
					b.Fatal(err)
				}
				defer tc.Close()
				ctx := context.Background()
				for b.Loop() {
					res, err := tc.Execute(ctx, toolbox.ExecuteRequest{Command: c.command})
					if err != nil || res.ExitCode != 0 {
						b.Fatalf("execute: %v, %v", res, err)
					}
				}
			})
		}
	}
}

// benchSandbox creates a started sandbox on srv and returns its id.
func benchSandbox(b *testing.B, srv *httptest.Server) string {
	b.Helper()
	do := func(method, path string, body io.Reader) sandboxDTO {
		req, _ := http.NewRequest(method, srv.URL+"/api"+path, body)
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var sb sandboxDTO
		if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %d, %v", method, path, resp.StatusCode, err)
		}
		return sb
	}
	sb := do("POST", "/sandbox", strings.NewReader("{}"))
	for deadline := time.Now().Add(20 * time.Second); sb.State != stateStarted; sb = do("GET", "/sandbox/"+sb.ID, nil) {
		if time.Now().After(deadline) {
			b.Fatalf("sandbox %s: %s", sb.ID, sb.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return sb.ID
}
