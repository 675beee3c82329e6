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
// activity trail recording it (trail), against the same server with the
// trail off (baseline) and with each entry committed on its own, an
// fsync per command (unbatched), for a command without output and one
// printing 4 MiB (which the trail's scanner reads through). Report
// trail/baseline and unbatched/baseline.
func BenchmarkTrailExecute(b *testing.B) {
	for _, c := range []struct{ name, command string }{
		{"quiet", "true"},
		{"4MiB", "head -c 4194304 /dev/zero | tr '\\0' a"},
	} {
		for _, mode := range []string{"baseline", "trail", "unbatched"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				s, err := newServer(Options{APIKeys: []string{testKey}, StateDir: b.TempDir()}, newFakeEngine(b), 5*time.Millisecond, time.Now)
				if err != nil {
					b.Fatal(err)
				}
				s.noTrail = mode == "baseline"
				s.store.trail.immediate = mode == "unbatched"
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

// BenchmarkJSONFieldsScan measures the trail's scanner reading a 4 MiB
// session exec answer (the exit code last, as the toolbox sends it) in
// the proxy's 32 KiB writes (scan), against copying the same writes into
// a 32 KiB buffer, the least the proxy does with them (baseline). Report
// scan/baseline.
func BenchmarkJSONFieldsScan(b *testing.B) {
	out := strings.Repeat("a line of output\n", 4<<20/18)
	answer := []byte(`{"cmdId":"c1","output":"` + out + `","stdout":"` + out + `","stderr":"","exitCode":0}`)
	buf := make([]byte, 32<<10)
	for _, mode := range []string{"baseline", "scan"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(answer)))
			for b.Loop() {
				j := newJSONFields(map[string]int{"exitCode": 16, "cmdId": 128})
				for p := answer; len(p) > 0; {
					n := min(len(p), len(buf))
					if mode == "scan" {
						_, _ = j.Write(p[:n])
					} else {
						copy(buf, p[:n])
					}
					p = p[n:]
				}
				if code, ok := j.integer("exitCode"); mode == "scan" && (!ok || code != 0) {
					b.Fatalf("exitCode %d, %v", code, ok)
				}
			}
		})
	}
}
