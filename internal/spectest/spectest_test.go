package spectest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/spectest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func jsonRequest(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func jsonResponse(status int, body string) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func TestValidateRequest(t *testing.T) {
	v := spectest.Load(t)
	tests := []struct {
		name    string
		req     *http.Request
		wantErr string // "" means valid
	}{
		{"session exec", jsonRequest("POST", "/process/session/s1/exec", `{"command":"echo hi","runAsync":true}`), ""},
		{"extension headers allowed", func() *http.Request {
			r := jsonRequest("POST", "/process/session/s1/command/c1/input", `{"data":"abc"}`)
			r.Header.Set("X-Agentbox-Use", "stdin")
			r.Header.Set("X-Agentbox-Stdin-Close", "true")
			return r
		}(), ""},
		{"create session", jsonRequest("POST", "/process/session", `{"sessionId":"abc"}`), ""},
		{"execute", jsonRequest("POST", "/process/execute", `{"command":"ls","cwd":"/tmp","envs":{"A":"b"},"timeout":3}`), ""},
		{"follow logs", httptest.NewRequest("GET", "/process/session/s1/command/c1/logs?follow=true", nil), ""},
		{"version", httptest.NewRequest("GET", "/version", nil), ""},
		{"missing command", jsonRequest("POST", "/process/session/s1/exec", `{"runAsync":true}`), "command"},
		{"command of wrong type", jsonRequest("POST", "/process/session/s1/exec", `{"command":5}`), "command"},
		{"timeout of wrong type", jsonRequest("POST", "/process/execute", `{"command":"ls","timeout":"soon"}`), "timeout"},
		{"follow not a boolean", httptest.NewRequest("GET", "/process/session/s1/command/c1/logs?follow=maybe", nil), "follow"},
		{"not json", jsonRequest("POST", "/process/session", `{`), "decode"},
		{"unknown route", httptest.NewRequest("GET", "/no/such/route", nil), "no operation"},
		{"wrong method", httptest.NewRequest("PUT", "/version", nil), "no operation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.ValidateRequest(tt.req)
			checkValidation(t, "request", err, tt.wantErr)
		})
	}
}

func TestErrNoRoute(t *testing.T) {
	v := spectest.Load(t)
	err := v.ValidateRequest(httptest.NewRequest("GET", "/nope", nil))
	if !errors.Is(err, spectest.ErrNoRoute) {
		t.Fatalf("err = %v, want ErrNoRoute", err)
	}
}

func TestValidateRequestKeepsBody(t *testing.T) {
	v := spectest.Load(t)
	const body = `{"command":"echo kept"}`
	r := jsonRequest("POST", "/process/session/s1/exec", body)
	if err := v.ValidateRequest(r); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r.Body)
	if string(got) != body {
		t.Fatalf("body after validation = %q, want %q", got, body)
	}
}

// The old daemon's POST /files/upload is only in the v0.190.0 document.
func TestOldDaemonUpload(t *testing.T) {
	v := spectest.Load(t)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "a.txt")
	fw.Write([]byte("hello"))
	mw.Close()
	r := httptest.NewRequest("POST", "/files/upload?path=/tmp/a.txt", &buf)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	if err := v.ValidateRequest(r); err != nil {
		t.Fatalf("upload rejected: %v", err)
	}
}

func TestValidateResponse(t *testing.T) {
	v := spectest.Load(t)
	exec := func() *http.Request { return jsonRequest("POST", "/process/session/s1/exec", `{"command":"true"}`) }
	tests := []struct {
		name    string
		req     *http.Request
		resp    *http.Response
		wantErr string
	}{
		{"sync exec", exec(), jsonResponse(200, `{"cmdId":"c1","exitCode":0,"output":"hi\n","stdout":"hi\n","stderr":""}`), ""},
		{"async exec", exec(), jsonResponse(202, `{"cmdId":"c1"}`), ""},
		{"error body", exec(), jsonResponse(404, `{"message":"session not found","statusCode":404,"path":"/process/session/s1/exec","timestamp":"2026-01-01T00:00:00Z"}`), ""},
		{"error body without path", exec(), jsonResponse(404, `{"message":"session not found","statusCode":404}`), "path"},
		{"unauthorized is ours", exec(), jsonResponse(401, `{"error":"bad token"}`), ""},
		{"websocket upgrade", httptest.NewRequest("GET", "/process/session/s1/command/c1/logs?follow=true", nil),
			&http.Response{StatusCode: 101, Header: http.Header{"Upgrade": {"websocket"}}, Body: http.NoBody}, ""},
		{"plain text logs", httptest.NewRequest("GET", "/process/session/s1/command/c1/logs", nil),
			&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, Body: io.NopCloser(strings.NewReader("hi\n"))}, ""},
		{"json logs", httptest.NewRequest("GET", "/process/session/s1/command/c1/logs", nil),
			jsonResponse(200, `{"output":"a","stdout":"a","stderr":""}`), ""},
		{"missing cmdId", exec(), jsonResponse(200, `{"exitCode":0,"output":""}`), "cmdId"},
		{"exitCode of wrong type", exec(), jsonResponse(200, `{"cmdId":"c1","exitCode":"0"}`), "exitCode"},
		{"undocumented status", exec(), jsonResponse(418, `{}`), "status"},
		{"wrong content type", exec(), &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: io.NopCloser(strings.NewReader("<p>"))}, "Content-Type"},
		{"command without id", httptest.NewRequest("GET", "/process/session/s1/command/c1", nil), jsonResponse(200, `{"command":"ls"}`), "id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.ValidateResponse(tt.req, tt.resp)
			checkValidation(t, "response", err, tt.wantErr)
			if tt.resp.Body != nil && tt.resp.StatusCode != 101 {
				if _, err := io.ReadAll(tt.resp.Body); err != nil {
					t.Fatalf("body not restored: %v", err)
				}
			}
		})
	}
}

func TestWithBasePath(t *testing.T) {
	v := spectest.Load(t).WithBasePath("/toolbox/sb1/")
	if err := v.ValidateRequest(httptest.NewRequest("GET", "/toolbox/sb1/version", nil)); err != nil {
		t.Fatalf("prefixed request rejected: %v", err)
	}
	if err := v.ValidateRequest(httptest.NewRequest("GET", "/version", nil)); !errors.Is(err, spectest.ErrNoRoute) {
		t.Fatalf("unprefixed request: err = %v, want ErrNoRoute", err)
	}
}

// recordingTB captures the failures a Validator reports.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	fatal  bool
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatal(args ...any) {
	r.mu.Lock()
	r.errors = append(r.errors, fmt.Sprint(args...))
	r.fatal = true
	r.mu.Unlock()
	panic(errFatal)
}

func (r *recordingTB) Helper() {}

var errFatal = errors.New("fatal")

func (r *recordingTB) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

func TestHandler(t *testing.T) {
	v := spectest.Load(t)
	rec := &recordingTB{TB: t}
	var seenBody string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /process/session/{sid}/exec", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seenBody = string(b)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(seenBody, "bad") {
			io.WriteString(w, `{"exitCode":0}`) // no cmdId
			return
		}
		io.WriteString(w, `{"cmdId":"c1","exitCode":0}`)
	})
	srv := httptest.NewServer(v.Handler(rec, mux))
	defer srv.Close()

	post := func(body string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/process/session/s/exec", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post(`{"command":"echo ok"}`)
	if got := rec.reported(); len(got) != 0 {
		t.Fatalf("valid exchange reported: %q", got)
	}
	if seenBody != `{"command":"echo ok"}` {
		t.Fatalf("handler read %q: body not restored", seenBody)
	}
	post(`{"command":"bad"}`)
	if got := rec.reported(); len(got) != 1 || !strings.Contains(got[0], "cmdId") {
		t.Fatalf("missing cmdId: reported %q, want one error naming cmdId", got)
	}
	post(`{"command":7}`)
	if got := rec.reported(); len(got) != 2 || !strings.Contains(got[1], "command") {
		t.Fatalf("wrong type: reported %q, want a second error naming command", got)
	}
}

func TestHandlerHijack(t *testing.T) {
	v := spectest.Load(t)
	rec := &recordingTB{TB: t}
	h := v.Handler(rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack through the middleware: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /process/session/s/command/c/logs?follow=true HTTP/1.1\r\nHost: x\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	if got := rec.reported(); len(got) != 0 {
		t.Fatalf("upgrade reported: %q", got)
	}
}

func TestTransport(t *testing.T) {
	v := spectest.Load(t)
	var seen string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = string(b)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/process/session/s/command/c" {
			io.WriteString(w, `{"command":"ls"}`) // missing id
			return
		}
		io.WriteString(w, `{"cmdId":"c1"}`)
	}))
	defer srv.Close()
	rec := &recordingTB{TB: t}
	client := &http.Client{Transport: v.Transport(rec, srv.Client().Transport)}

	resp, err := client.Post(srv.URL+"/process/session/s/exec", "application/json", strings.NewReader(`{"command":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"cmdId":"c1"}` || seen != `{"command":"x"}` {
		t.Fatalf("bodies not passed through: client got %q, server got %q", body, seen)
	}
	if got := rec.reported(); len(got) != 0 {
		t.Fatalf("valid exchange reported: %q", got)
	}
	resp, err = client.Get(srv.URL + "/process/session/s/command/c")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := rec.reported(); len(got) != 1 || !strings.Contains(got[0], "id") {
		t.Fatalf("reported %q, want one error about the missing id", got)
	}
}

func TestMissingSpecDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	t.Setenv(spectest.EnvSpecDir, dir)
	if _, err := spectest.SpecDir(); err == nil || !strings.Contains(err.Error(), spectest.EnvSpecDir) {
		t.Fatalf("SpecDir error = %v, want one naming %s", err, spectest.EnvSpecDir)
	}
	if _, err := spectest.New(dir); err == nil {
		t.Fatal("New on a missing folder succeeded")
	}
	rec := &recordingTB{TB: t}
	func() {
		defer func() {
			if p := recover(); p != errFatal {
				panic(p)
			}
		}()
		spectest.Load(rec)
	}()
	if !rec.fatal {
		t.Fatal("Load did not fail the test on a missing spec folder")
	}
}

func TestDefaultSpecDir(t *testing.T) {
	if os.Getenv(spectest.EnvSpecDir) != "" {
		t.Skip("spec dir set explicitly")
	}
	dir := spectest.Dir(t)
	if filepath.Base(dir) != "daytona-api" {
		t.Fatalf("default spec dir %s", dir)
	}
}

// BenchmarkValidateRequest reports the cost of validating a session exec
// request as a ratio to merely decoding its JSON body, measured in the same
// run.
func BenchmarkValidateRequest(b *testing.B) {
	v := spectest.Load(b)
	body := []byte(`{"command":"echo hi","runAsync":true}`)
	newReq := func() *http.Request {
		r := httptest.NewRequest("POST", "/process/session/s1/exec", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	const baseRuns = 2000
	start := time.Now()
	for range baseRuns {
		var m map[string]any
		if err := json.NewDecoder(newReq().Body).Decode(&m); err != nil {
			b.Fatal(err)
		}
	}
	base := time.Since(start) / baseRuns
	b.ResetTimer()
	start = time.Now()
	for b.Loop() {
		if err := v.ValidateRequest(newReq()); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(base), "x-json-decode")
}

// A handler that gives up without answering after its client went away
// sent nothing to validate.
func TestHandlerClientGone(t *testing.T) {
	v := spectest.Load(t)
	rec := &recordingTB{TB: t}
	returned := make(chan struct{})
	entered := make(chan struct{})
	h := v.Handler(rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		close(entered)
		<-r.Context().Done()
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/process/session/s/exec", strings.NewReader(`{"command":"sleep 9"}`))
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	cancel()
	<-returned
	if err := <-errc; err == nil {
		t.Fatal("cancelled request succeeded")
	}
	srv.Close() // waits for the middleware to finish
	if got := rec.reported(); len(got) != 0 {
		t.Fatalf("abandoned exchange reported: %q", got)
	}
}

func TestControlPlane(t *testing.T) {
	v := spectest.LoadControlPlane(t).WithBasePath("/api")
	if err := v.ValidateRequest(httptest.NewRequest("GET", "/api/sandbox/abc", nil)); err != nil {
		t.Fatalf("GET /sandbox/{id} rejected: %v", err)
	}
	// The API-proxied toolbox routes exist only in the v0.190.0 document.
	if err := v.ValidateRequest(httptest.NewRequest("GET", "/api/toolbox/abc/toolbox/project-dir", nil)); err != nil {
		t.Fatalf("proxied toolbox route rejected: %v", err)
	}
	if err := v.ValidateRequest(jsonRequest("POST", "/api/sandbox", `{"cpu":2}`)); err != nil {
		t.Fatalf("create sandbox rejected: %v", err)
	}
	if err := v.ValidateRequest(jsonRequest("POST", "/api/sandbox", `{"cpu":"two"}`)); err == nil || !strings.Contains(err.Error(), "cpu") {
		t.Fatalf("create with a string cpu: err = %v, want one naming cpu", err)
	}
	// Errors, which the documents never declare, have Daytona's shape.
	get := httptest.NewRequest("GET", "/api/sandbox/abc", nil)
	shaped := `{"statusCode":404,"error":"Not Found","message":"Sandbox with ID or name abc not found","path":"/api/sandbox/abc","timestamp":"2026-01-01T00:00:00.000Z"}`
	if err := v.ValidateResponse(get, jsonResponse(404, shaped)); err != nil {
		t.Fatalf("404 in Daytona's error shape rejected: %v", err)
	}
	if err := v.ValidateResponse(get, jsonResponse(404, `{"message":"nope"}`)); err == nil || !strings.Contains(err.Error(), "statusCode") {
		t.Fatalf("404 without statusCode: err = %v, want one naming statusCode", err)
	}
	if err := v.ValidateResponse(get, jsonResponse(200, `{"id":"abc"}`)); err == nil {
		t.Fatal("a Sandbox without its required fields was accepted")
	}
	if a, b := spectest.LoadControlPlane(t), spectest.LoadControlPlane(t); a != b {
		t.Fatal("control-plane documents loaded twice")
	}
}

func TestLoadShared(t *testing.T) {
	if a, b := spectest.Load(t), spectest.Load(t); a != b {
		t.Fatal("toolbox documents loaded twice in one process")
	}
	if got := spectest.Load(t).Specs(); len(got) != 2 || got[0] != spectest.ToolboxSpec || got[1] != spectest.DaemonSpec {
		t.Fatalf("Specs() = %q", got)
	}
	routes := spectest.Load(t).Routes()
	for _, want := range []string{"POST /files/upload", "POST /process/session/{sessionId}/exec", "GET /process/session/{sessionId}/command/{commandId}/logs"} {
		if !slices.Contains(routes, want) {
			t.Fatalf("Routes() lacks %q", want)
		}
	}
}

func TestResponsesOnly(t *testing.T) {
	v := spectest.Load(t).ResponsesOnly()
	const errBody = `{"statusCode":%d,"code":"BAD_REQUEST","message":"m","path":"/p","method":"POST","timestamp":"2026-01-01T00:00:00Z"}`
	tests := []struct {
		name    string
		req     *http.Request
		resp    *http.Response
		wantErr string // "" means valid
	}{
		{"malformed request, declared 400",
			jsonRequest("POST", "/process/execute", `{"command":`),
			jsonResponse(400, fmt.Sprintf(errBody, 400)), ""},
		{"undeclared 413 with ErrorResponse shape",
			jsonRequest("POST", "/process/execute", `{"command":"x"}`),
			jsonResponse(413, fmt.Sprintf(errBody, 413)), ""},
		{"undeclared 413 missing statusCode",
			jsonRequest("POST", "/process/execute", `{"command":"x"}`),
			jsonResponse(413, `{"message":"m","path":"/p","timestamp":"t"}`), "statusCode"},
		{"undeclared 413 not JSON",
			jsonRequest("POST", "/process/execute", `{"command":"x"}`),
			&http.Response{StatusCode: 413, Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("too big"))},
			"Content-Type"},
		{"unknown route 404 with ErrorResponse shape",
			httptest.NewRequest("GET", "/nope", nil),
			jsonResponse(404, fmt.Sprintf(errBody, 404)), ""},
		{"unknown route 404 with another shape",
			httptest.NewRequest("GET", "/nope", nil),
			jsonResponse(404, `{"error":"nope"}`), "ErrorResponse"},
		{"unknown route 200",
			httptest.NewRequest("GET", "/nope", nil),
			jsonResponse(200, `{}`), "no operation"},
		{"declared 400 with a wrong shape",
			jsonRequest("POST", "/process/execute", `{"command":`),
			jsonResponse(400, `{"message":5}`), "message"},
		{"undeclared success status",
			jsonRequest("POST", "/process/execute", `{"command":"x"}`),
			jsonResponse(202, `{}`), "status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.ValidateResponse(tt.req, tt.resp)
			checkValidation(t, "response", err, tt.wantErr)
		})
	}
	// The full Validator still rejects an undeclared status.
	err := spectest.Load(t).ValidateResponse(jsonRequest("POST", "/process/execute", `{"command":"x"}`), jsonResponse(413, fmt.Sprintf(errBody, 413)))
	if err == nil {
		t.Fatal("full validator accepted an undeclared 413")
	}
}

func TestResponsesOnlyHandlerAndTransport(t *testing.T) {
	v := spectest.Load(t).ResponsesOnly()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /process/execute", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(b), "wrong") {
			w.WriteHeader(400)
			io.WriteString(w, `{"message":"no path"}`)
			return
		}
		w.WriteHeader(400)
		io.WriteString(w, `{"statusCode":400,"message":"bad","path":"/process/execute","timestamp":"2026-01-01T00:00:00Z"}`)
	})
	hrec := &recordingTB{TB: t}
	srv := httptest.NewServer(v.Handler(hrec, mux))
	defer srv.Close()
	trec := &recordingTB{TB: t}
	client := &http.Client{Transport: v.Transport(trec, srv.Client().Transport)}
	post := func(body string) {
		t.Helper()
		resp, err := client.Post(srv.URL+"/process/execute", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post(`{"command":`) // malformed on purpose: not reported
	if got := append(hrec.reported(), trec.reported()...); len(got) != 0 {
		t.Fatalf("malformed request with a valid answer reported: %q", got)
	}
	post(`{"command":"wrong"`)
	if got := hrec.reported(); len(got) != 1 || !strings.Contains(got[0], "path") {
		t.Fatalf("handler reported %q, want one error about the missing path", got)
	}
	if got := trec.reported(); len(got) != 1 || !strings.Contains(got[0], "path") {
		t.Fatalf("transport reported %q, want one error about the missing path", got)
	}
}

func TestSkipBodiesOver(t *testing.T) {
	v := spectest.Load(t).SkipBodiesOver(64)
	big := `{"exitCode":"` + strings.Repeat("x", 100) + `"}`
	req := func() *http.Request { return jsonRequest("POST", "/process/execute", `{"command":"x"}`) }
	if err := v.ValidateResponse(req(), jsonResponse(200, big)); err != nil {
		t.Fatalf("body above the limit checked: %v", err)
	}
	if err := v.ValidateResponse(req(), jsonResponse(200, `{"exitCode":"no"}`)); err == nil {
		t.Fatal("invalid body below the limit accepted")
	}
	if err := v.ValidateRequest(jsonRequest("POST", "/process/execute", `{"command":5,"cwd":"`+strings.Repeat("x", 100)+`"}`)); err != nil {
		t.Fatalf("request body above the limit checked: %v", err)
	}
	// The handler keeps at most limit+1 bytes and then skips the body,
	// yet the client receives everything.
	rec := &recordingTB{TB: t}
	srv := httptest.NewServer(v.Handler(rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i < len(big); i += 10 {
			io.WriteString(w, big[i:min(i+10, len(big))])
		}
	})))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/process/execute", "application/json", strings.NewReader(`{"command":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != big {
		t.Fatalf("client got %q", got)
	}
	if r := rec.reported(); len(r) != 0 {
		t.Fatalf("reported %q", r)
	}
}

// An operation that produces only application/octet-stream still answers
// its errors as JSON, as Daytona's daemon does: the error is checked
// against the ErrorResponse schema the spec gives it.
func TestJSONErrorOfBinaryOperation(t *testing.T) {
	v := spectest.Load(t)
	req := httptest.NewRequest("GET", "/files/download?path=x", nil)
	ok := `{"statusCode":404,"message":"no such file","path":"/files/download","timestamp":"2026-01-01T00:00:00Z"}`
	if err := v.ValidateResponse(req, jsonResponse(404, ok)); err != nil {
		t.Fatalf("JSON error rejected: %v", err)
	}
	if err := v.ValidateResponse(req, jsonResponse(404, `{"message":"no such file"}`)); err == nil || !strings.Contains(err.Error(), "statusCode") {
		t.Fatalf("incomplete error: got %v, want an error naming statusCode", err)
	}
	if err := v.ValidateResponse(req, jsonResponse(404, `not json`)); err == nil {
		t.Fatal("error body that is not JSON accepted")
	}
}

// checkValidation fails t unless err fits wantErr: nil for "", else an
// error mentioning wantErr. what names the validated thing in messages.
func checkValidation(t *testing.T, what string, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("valid %s rejected: %v", what, err)
	case wantErr != "" && err == nil:
		t.Fatalf("invalid %s accepted", what)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("error %q does not mention %q", err, wantErr)
	}
}

// A binary exec answer (the agentbox binary extension) is accepted for a
// sync session exec that opted in, checked against the extension's rules,
// and for nothing else.
func TestBinaryExecAnswer(t *testing.T) {
	v := spectest.Load(t)
	exec := func(use string) *http.Request {
		r := jsonRequest("POST", "/process/session/s1/exec", `{"command":"true"}`)
		if use != "" {
			r.Header.Set("X-Agentbox-Use", use)
		}
		return r
	}
	binary := func(status int, body string, mod func(http.Header)) *http.Response {
		h := http.Header{}
		h.Set("Content-Type", "application/octet-stream")
		h.Set("X-Agentbox-Command-Id", "c1")
		h.Set("X-Agentbox-Exit-Code", "3")
		h.Set("X-Agentbox-Stdout-Bytes", "3")
		h.Set("X-Agentbox-Stderr-Bytes", "2")
		h.Set("X-Agentbox-Stdout-Dropped", "0")
		h.Set("X-Agentbox-Stderr-Dropped", "7")
		if mod != nil {
			mod(h)
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
	}
	tests := []struct {
		name    string
		req     *http.Request
		resp    *http.Response
		wantErr string
	}{
		{"opted in", exec("base64, binary,stateless"), binary(200, "out\x00e", nil), ""},
		{"not opted in", exec("base64"), binary(200, "out\x00e", nil), "did not opt in"},
		{"no opt-in header", exec(""), binary(200, "out\x00e", nil), "did not opt in"},
		{"length mismatch", exec("binary"), binary(200, "out", nil), "body holds 3 bytes"},
		{"not 200", exec("binary"), binary(202, "out\x00e", nil), "status 202"},
		{"bad exit code", exec("binary"), binary(200, "out\x00e", func(h http.Header) { h.Set("X-Agentbox-Exit-Code", "x") }), "Exit-Code"},
		{"missing count", exec("binary"), binary(200, "out\x00e", func(h http.Header) { h.Del("X-Agentbox-Stderr-Dropped") }), "Stderr-Dropped"},
		{"missing command id", exec("binary"), binary(200, "out\x00e", func(h http.Header) { h.Del("X-Agentbox-Command-Id") }), "Command-Id"},
		{"other operation", func() *http.Request {
			r := httptest.NewRequest("GET", "/process/session/s1/command/c1/logs", nil)
			r.Header.Set("X-Agentbox-Use", "binary")
			return r
		}(), binary(200, "out\x00e", nil), "Content-Type"},
		{"other method", func() *http.Request {
			r := httptest.NewRequest("GET", "/process/session/s1", nil)
			r.Header.Set("X-Agentbox-Use", "binary")
			return r
		}(), binary(200, "out\x00e", nil), "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkValidation(t, "response", v.ValidateResponse(tt.req, tt.resp), tt.wantErr)
		})
	}
}

// A bulk-download answer (multipart, declared as a free-form object) is
// checked part by part: parts named file (with a filename) or error (an
// ErrorResponse), the body complete.
func TestBulkDownloadParts(t *testing.T) {
	v := spectest.Load(t)
	errPart := `{"statusCode":404,"message":"not found: missing.txt","path":"/files/bulk-download","timestamp":"2026-01-01T00:00:00Z"}`
	type part struct{ name, filename, body string }
	answer := func(parts []part, cut int) *http.Response {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for _, p := range parts {
			h := textproto.MIMEHeader{}
			cd := fmt.Sprintf("form-data; name=%q", p.name)
			if p.filename != "" {
				cd += fmt.Sprintf("; filename=%q", p.filename)
			}
			h.Set("Content-Disposition", cd)
			w, err := mw.CreatePart(h)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(w, p.body)
		}
		mw.Close()
		h := http.Header{}
		h.Set("Content-Type", mw.FormDataContentType())
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader(b.Bytes()[:b.Len()-cut]))}
	}
	for _, tt := range []struct {
		name    string
		parts   []part
		cut     int
		wantErr string
	}{
		{"files and errors", []part{{"file", "/w/a.txt", "abc"}, {"error", "/w/missing.txt", errPart}}, 0, ""},
		{"no parts", nil, 0, ""},
		{"part named by its path", []part{{"/w/a.txt", "/w/a.txt", "abc"}}, 0, `named "/w/a.txt"`},
		{"file without filename", []part{{"file", "", "abc"}}, 0, "no filename"},
		{"error not an ErrorResponse", []part{{"error", "/w/x", `{"message":"x"}`}}, 0, "statusCode"},
		{"truncated", []part{{"file", "/w/a.txt", "abc"}}, 10, "unexpected EOF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := jsonRequest("POST", "/files/bulk-download", `{"paths":["/w/a.txt"]}`)
			checkValidation(t, "answer", v.ValidateResponse(req, answer(tt.parts, tt.cut)), tt.wantErr)
		})
	}
}
