package secretproxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkSecretProxy compares an HTTPS request through the
// substituting proxy with the same request sent directly to the same TLS
// server, in one run: a 1 MiB response (throughput) and a small one
// (latency per request), on kept-alive connections.
//
//	go test -run '^$' -bench BenchmarkSecretProxy -benchtime 2s ./internal/secretproxy/
func BenchmarkSecretProxy(b *testing.B) {
	big := strings.Repeat("x", 1<<20)
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(b, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", itoa(len(big)))
			_, _ = io.WriteString(w, big)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}, s)
	e.up.handler = nil
	direct := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", e.up.srv.Listener.Addr().String())
		},
		TLSClientConfig: &tls.Config{RootCAs: e.up.pool},
	}}
	b.Cleanup(direct.CloseIdleConnections)
	proxied := e.client()
	for _, size := range []struct{ name, path string }{{"1MiB", "/big"}, {"small", "/small"}} {
		for _, via := range []struct {
			name string
			c    *http.Client
		}{{"direct", direct}, {"proxy", proxied}} {
			b.Run(size.name+"/"+via.name, func(b *testing.B) {
				if size.path == "/big" {
					b.SetBytes(int64(len(big)))
				}
				for b.Loop() {
					req, _ := http.NewRequest("GET", "https://api.test"+size.path, nil)
					req.Header.Set("Authorization", "Bearer "+s.Placeholder)
					resp, err := via.c.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
}
