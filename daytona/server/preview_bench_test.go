package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// BenchmarkPreview measures a GET of a sandbox's web server: direct to a
// published port (the baseline: DNAT on the host's loopback), through a
// reverse proxy to that port (what serve's previews did), and through
// serve's preview (connections made from inside the sandbox's network
// namespace): host-based (serve-host, PORT-ID.localhost) and through the
// preview listener of the port (serve-listener, issue 27). keepalive: the app keeps connections (HTTP/1.1), so serve
// reuses them; close: the app closes each (HTTP/1.0), so every request
// is a new connection.
func BenchmarkPreview(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the local engine's default network")
	}
	s, srv, api, sb, dir := previewBench(b)
	ctx := context.Background()
	h, err := local.Open(ctx, dir, sb.ID)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		port int
	}{{"keepalive", 8080}, {"close", 8081}} {
		pp, err := h.PublishPort(ctx, 0, mode.port)
		if err != nil {
			b.Fatal(err)
		}
		published := &url.URL{Scheme: "http", Host: net.JoinHostPort(pp.HostAddress, strconv.Itoa(pp.HostPort))}
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(published))
		var link portPreviewURL
		api("GET", "/sandbox/"+sb.ID+"/ports/"+strconv.Itoa(mode.port)+"/preview-url", nil, &link)
		pu, _ := url.Parse(link.URL)
		s.mu.Lock()
		s.previewDomainOpt = "" // the default form, for the next link
		s.mu.Unlock()
		var listened portPreviewURL
		api("GET", "/sandbox/"+sb.ID+"/ports/"+strconv.Itoa(mode.port)+"/preview-url", nil, &listened)
		s.mu.Lock()
		s.previewDomainOpt = "localhost"
		s.mu.Unlock()
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		get := func(b *testing.B, u, host string, preview bool) {
			req, _ := http.NewRequest("GET", u, nil)
			if host != "" {
				req.Host = host
			}
			if preview {
				req.Header.Set(previewTokenHeader, link.Token)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(data) != "hi\n" {
				b.Fatalf("GET %s (%s): %d %q", u, host, resp.StatusCode, data)
			}
		}
		waitServing(b, client, published.String()+"/")
		b.Run(mode.name+"/direct", func(b *testing.B) {
			for b.Loop() {
				get(b, published.String()+"/", "", false)
			}
		})
		b.Run(mode.name+"/proxy-published", func(b *testing.B) {
			for b.Loop() {
				get(b, proxy.URL+"/", "", false)
			}
		})
		b.Run(mode.name+"/serve-host", func(b *testing.B) {
			for b.Loop() {
				get(b, srv.URL+"/", pu.Host, true)
			}
		})
		b.Run(mode.name+"/serve-listener", func(b *testing.B) {
			for b.Loop() {
				get(b, listened.URL+"/", "", true)
			}
		})
		proxy.Close()
		client.CloseIdleConnections()
	}
}

// previewBench starts a server over the local engine (host-based preview
// URLs under localhost) with a started sandbox serving "hi\n" on 8080
// (HTTP/1.1) and 8081 (HTTP/1.0), and returns the server, its test
// server, a caller of its API, the sandbox and its state dir; all ended
// by the benchmark's cleanup.
func previewBench(b *testing.B) (*Server, *httptest.Server, func(method, path string, body, out any), apiSandbox, string) {
	dir := b.TempDir()
	s, err := newServer(Options{StateDir: dir, PreviewDomain: "localhost"}, localEngine{stateDir: dir}, 50*time.Millisecond, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	b.Cleanup(func() {
		srv.Close()
		s.Close(context.Background())
	})
	api := func(method, path string, body, out any) {
		var rd io.Reader
		if body != nil {
			data, _ := json.Marshal(body)
			rd = bytes.NewReader(data)
		}
		req, _ := http.NewRequest(method, srv.URL+"/api"+path, rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(resp.Body)
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
	}
	var sb apiSandbox
	api("POST", "/sandbox", map[string]any{}, &sb)
	b.Cleanup(func() { localtest.Destroy(context.Background(), dir, sb.ID) })
	for deadline := time.Now().Add(time.Minute); sb.State != stateStarted; {
		if time.Now().After(deadline) {
			b.Fatalf("sandbox: %+v", sb)
		}
		time.Sleep(20 * time.Millisecond)
		api("GET", "/sandbox/"+sb.ID, nil, &sb)
	}
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	for port, proto := range map[int]string{8080: "HTTP/1.1", 8081: "HTTP/1.0"} {
		session := "web" + strconv.Itoa(port)
		if err := c.CreateSession(ctx, session); err != nil {
			b.Fatal(err)
		}
		// One server per session: exec makes it the session's shell.
		cmd := "mkdir -p /tmp/site && echo hi > /tmp/site/index.html && cd /tmp/site && exec python3 -c \"import http.server as h; R=h.SimpleHTTPRequestHandler; R.protocol_version='" + proto + "'; R.disable_nagle_algorithm=True; R.log_message=lambda *a: None; h.ThreadingHTTPServer(('0.0.0.0'," + strconv.Itoa(port) + "), R).serve_forever()\""
		if _, err := c.SessionExecute(ctx, session, toolbox.SessionExecuteRequest{Command: cmd, RunAsync: true}); err != nil {
			b.Fatal(err)
		}
	}
	return s, srv, api, sb, dir
}

// waitServing waits up to 20 s for u to answer.
func waitServing(b *testing.B, client *http.Client, u string) {
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
	}
}
