package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// dashboardPageFiles are what a browser fetches to show the sandboxes
// page (index.html, its stylesheet and the modules app.js imports), before
// the page's own calls.
var dashboardPageFiles = []string{"", "style.css", "app.js", "api.js", "dom.js", "sandbox.js", "logs.js", "term.js", "chart.js"}

// benchDashboard is a server over the fake engine with n sandboxes and a
// dashboard session, driven through ServeHTTP (server time only).
type benchDashboard struct {
	s            *Server
	cookie, csrf string
}

// serve sends method path with body and the session (when cookie is set)
// and returns the answer.
func (d *benchDashboard) serve(b *testing.B, method, path string, body any, hdr ...string) *httptest.ResponseRecorder {
	var rd *bytes.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	var req *http.Request
	if rd != nil {
		req = httptest.NewRequest(method, path, rd)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	req.Host = "127.0.0.1:2280"
	req.RemoteAddr = "127.0.0.1:40000"
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	d.s.ServeHTTP(rec, req)
	return rec
}

func newBenchDashboard(b *testing.B, n int) *benchDashboard {
	b.Helper()
	s, err := newServer(Options{APIKeys: []string{testKey}, StateDir: b.TempDir(), MaxSandboxesPerOrg: n + 1, Knobs: &Knobs{MetricsInterval: time.Hour}}, newFakeEngine(b), time.Hour, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	d := &benchDashboard{s: s}
	for i := range n {
		rec := d.serve(b, "POST", "/api/sandbox", map[string]any{"name": fmt.Sprintf("sb-%03d", i), "labels": map[string]string{"team": "bench", "n": fmt.Sprint(i)}}, "Authorization", "Bearer "+testKey)
		if rec.Code != http.StatusOK {
			b.Fatalf("create %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := d.serve(b, "POST", "/dashboard/login", map[string]string{"key": testKey})
	if rec.Code != http.StatusOK {
		b.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	var sess dashboardSession
	if err := json.Unmarshal(rec.Body.Bytes(), &sess); err != nil {
		b.Fatal(err)
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == dashboardCookie {
			d.cookie = c.Name + "=" + c.Value
		}
	}
	d.csrf = sess.CSRFToken
	// Every sandbox started: the page lists them as they will be.
	deadline := time.Now().Add(time.Minute)
	for {
		if got := d.listed(b, "&states=started", "Authorization", "Bearer "+testKey); got == n {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("%d of %d sandboxes started", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return d
}

// listed returns how many sandboxes GET /api/sandbox?limit=200 and q
// answers with the headers hdr.
func (d *benchDashboard) listed(b *testing.B, q string, hdr ...string) int {
	var list listSandboxes
	rec := d.serve(b, "GET", "/api/sandbox?limit=200"+q, nil, hdr...)
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &list) != nil {
		b.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	return len(list.Items)
}

// page makes the requests of one showing of the sandboxes page and
// returns the bytes answered; it fails on any status but 200.
func (d *benchDashboard) page(b *testing.B) int {
	n := 0
	for _, f := range dashboardPageFiles {
		rec := d.serve(b, "GET", "/dashboard/"+f, nil, "Cookie", d.cookie)
		if rec.Code != http.StatusOK {
			b.Fatalf("/dashboard/%s: %d", f, rec.Code)
		}
		n += rec.Body.Len()
	}
	rec := d.serve(b, "GET", "/dashboard/session", nil, "Cookie", d.cookie)
	if rec.Code != http.StatusOK {
		b.Fatalf("session: %d", rec.Code)
	}
	n += rec.Body.Len()
	// As app.js asks (the list is Daytona's GET /sandbox).
	rec = d.serve(b, "GET", "/api/sandbox?limit=200", nil, "Cookie", d.cookie, csrfHeader, d.csrf)
	if rec.Code != http.StatusOK {
		b.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	return n + rec.Body.Len()
}

// BenchmarkDashboardSandboxesPage200 measures the server time of what the
// dashboard's sandboxes page requests to render (index.html, stylesheet,
// modules, session, the list of sandboxes) with 200 sandboxes, and with
// none as the baseline: compare their ns/op, and the goal of 300 ms.
func BenchmarkDashboardSandboxesPage200(b *testing.B) {
	for _, n := range []int{0, 200} {
		b.Run(fmt.Sprintf("sandboxes=%d", n), func(b *testing.B) {
			d := newBenchDashboard(b, n)
			if got := d.listed(b, "", "Cookie", d.cookie, csrfHeader, d.csrf); got != n {
				b.Fatalf("the page's list has %d sandboxes, want %d", got, n)
			}
			bytes := d.page(b)
			b.ReportAllocs()
			for b.Loop() {
				d.page(b)
			}
			b.ReportMetric(float64(bytes), "bytes/page")
		})
	}
}
