//go:build linux

package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/mcp"
	"github.com/agentbox-dev/agentbox/tools"
)

type obj = map[string]any

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu   sync.Mutex
	msgs map[any][]string
	seen chan struct{} // gets a value per notification
}

func newProgressLog() *progressLog {
	return &progressLog{msgs: map[any][]string{}, seen: make(chan struct{}, 1000)}
}

func (p *progressLog) handler(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.msgs[req.Params.ProgressToken] = append(p.msgs[req.Params.ProgressToken], req.Params.Message)
	p.mu.Unlock()
	select {
	case p.seen <- struct{}{}:
	default:
	}
}

// waitFor waits until a notification for token holds text.
func (p *progressLog) waitFor(t *testing.T, token any, text string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		for _, m := range p.msgs[token] {
			if strings.Contains(m, text) {
				p.mu.Unlock()
				return
			}
		}
		p.mu.Unlock()
		select {
		case <-p.seen:
		case <-deadline:
			t.Fatalf("no progress notification for %v holds %q", token, text)
		}
	}
}

// callTool calls a tool and fails the test on a protocol error.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args obj) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error %v", name, args, err)
	}
	return res
}

// text returns the text content of a result.
func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mustTool is callTool that also fails on a tool error and returns the
// result's text and structured content.
func mustTool(t *testing.T, cs *sdk.ClientSession, name string, args obj) (string, map[string]any) {
	t.Helper()
	res := callTool(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", name, args, text(res))
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &m)
	return text(res), m
}

// exercise runs the scenario every transport must pass.
func exercise(t *testing.T, cs *sdk.ClientSession, progress *progressLog) {
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
		if !strings.Contains(tool.Description, "Local sandbox with isolated execution") {
			t.Errorf("the description of %s lacks the sandbox's instructions: %q", tool.Name, tool.Description)
		}
	}
	for _, n := range []string{tools.NameExecute, tools.NameReadOutput, tools.NameProcessOutput, tools.NameProcessStdin, tools.NameProcessKill, tools.NameProcessList, tools.NameReadFile, tools.NameWriteFile, tools.NameEditFile, tools.NameListFiles, tools.NameFindFiles, tools.NameDeleteFile} {
		if !names[n] {
			t.Errorf("tool %s is not listed", n)
		}
	}

	t.Run("command", func(t *testing.T) {
		out, data := mustTool(t, cs, tools.NameExecute, obj{"command": "echo hello; pwd"})
		if out != "hello\n/tmp/w\n" || data["exitCode"] != 0.0 {
			t.Fatalf("echo: %q %v", out, data)
		}
	})

	t.Run("progress", func(t *testing.T) {
		// The command ends once the test saw a progress notification with
		// its first line: no timing assumption.
		done := make(chan *sdk.CallToolResult, 1)
		go func() {
			p := &sdk.CallToolParams{Name: tools.NameExecute, Arguments: obj{"command": "rm -f /tmp/w/go; echo step-one; while ! test -e /tmp/w/go; do sleep 0.02; done; echo finished"}}
			p.SetProgressToken("progress-1")
			res, err := cs.CallTool(ctx, p)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		progress.waitFor(t, "progress-1", "step-one")
		mustTool(t, cs, tools.NameWriteFile, obj{"path": "go", "content": ""})
		if res := <-done; res == nil || res.IsError || text(res) != "step-one\nfinished\n" {
			t.Fatalf("progress command: %+v", res)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			p := &sdk.CallToolParams{Name: tools.NameExecute, Arguments: obj{"command": "echo $$ > /tmp/w/pid; echo started; exec sleep 300"}}
			p.SetProgressToken("cancel-1")
			_, err := cs.CallTool(cctx, p)
			errc <- err
		}()
		progress.waitFor(t, "cancel-1", "started")
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("a cancelled call succeeded")
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, _ := mustTool(t, cs, tools.NameExecute, obj{"command": "kill -0 $(cat /tmp/w/pid) 2>/dev/null && echo alive || echo dead"})
			if out == "dead\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the command of a cancelled call still runs")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("background", func(t *testing.T) {
		_, data := mustTool(t, cs, tools.NameExecute, obj{"command": "echo one; read x; echo two:$x", "background": true})
		pid, _ := data["pid"].(string)
		if pid == "" {
			t.Fatalf("no pid: %v", data)
		}
		_, out := mustTool(t, cs, tools.NameProcessOutput, obj{"pid": pid, "cursor": 0, "wait": 20})
		if out["output"] != "one\n" {
			t.Fatalf("first output: %v", out)
		}
		mustTool(t, cs, tools.NameProcessStdin, obj{"pid": pid, "data": "zz\n"})
		_, out = mustTool(t, cs, tools.NameProcessOutput, obj{"pid": pid, "cursor": out["nextCursor"], "wait": 20})
		if out["output"] != "two:zz\n" {
			t.Fatalf("output past the cursor: %v", out)
		}
	})

	t.Run("edit", func(t *testing.T) {
		mustTool(t, cs, tools.NameWriteFile, obj{"path": "main.go", "content": "package main\n\nfunc main() { println(\"a\") }\n"})
		mustTool(t, cs, tools.NameEditFile, obj{"path": "main.go", "old_string": `println("a")`, "new_string": `println("b")`})
		out, _ := mustTool(t, cs, tools.NameReadFile, obj{"path": "/tmp/w/main.go", "offset": 3})
		if !strings.HasPrefix(out, "func main() { println(\"b\") }\n") {
			t.Fatalf("after edit: %q", out)
		}
		res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "file:///tmp/w/main.go"})
		if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `println("b")`) {
			t.Fatalf("resource: %+v %v", res, err)
		}
		if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "file:///tmp/w/nope"}); err == nil {
			t.Fatal("a missing file read as a resource")
		}
	})

	t.Run("refused", func(t *testing.T) {
		res := callTool(t, cs, tools.NameExecute, obj{"command": "echo " + forbidden + " > /tmp/w/ran"})
		if !res.IsError || !strings.Contains(text(res), "not allowed") || !strings.Contains(text(res), "policy forbids") {
			t.Fatalf("refused command: %+v %s", res, text(res))
		}
		if out, _ := mustTool(t, cs, tools.NameExecute, obj{"command": "test -e /tmp/w/ran && echo ran || echo no"}); out != "no\n" {
			t.Fatal("the refused command ran")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, args := range []obj{{}, {"command": 7}, {"command": "true", "timeout": "soon"}, {"command": "true", "extra": 1}} {
			res := callTool(t, cs, tools.NameExecute, args)
			if !res.IsError || !strings.Contains(text(res), "invalid") {
				t.Errorf("%v: %+v %s", args, res, text(res))
			}
		}
	})

	t.Run("huge output", func(t *testing.T) {
		res := callTool(t, cs, tools.NameExecute, obj{"command": "seq 1 100000"})
		out := text(res)
		if res.IsError || len(out) > 5000 || !strings.HasPrefix(out, "1\n2\n") || !strings.HasSuffix(out, "99999\n100000\n") || !strings.Contains(out, "the output has 588895 bytes") {
			t.Fatalf("not bounded (%d bytes): %.300s", len(out), out)
		}
		var data map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &data)
		page, p := mustTool(t, cs, tools.NameReadOutput, obj{"handle": data["handle"], "offset": 588895 - 7})
		if p["data"] != "100000\n" || !strings.Contains(page, "end of output") {
			t.Fatalf("read_output: %v", p)
		}
	})
}

func TestStdio(t *testing.T) {
	stateDir := t.TempDir()
	removeAtEnd(t, stateDir)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), stdioEnv+"="+stateDir)
	cmd.Stderr = os.Stderr
	progress := newProgressLog()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{ProgressNotificationHandler: progress.handler})
	cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, cs, progress)
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// bearer adds a bearer token to requests.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// newHTTPServer serves the test server over HTTP with token; the test
// ends it.
func newHTTPServer(t *testing.T, opts *mcp.Options, token string) *httptest.Server {
	stateDir := t.TempDir()
	removeAtEnd(t, stateDir)
	srv, closeAll, err := newServer(stateDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler(&mcp.HTTPOptions{Token: token}))
	t.Cleanup(func() { hs.Close(); closeAll() })
	return hs
}

// connectHTTP connects a client speaking protocol version ("" for the
// SDK's latest) to hs with token.
func connectHTTP(t *testing.T, hs *httptest.Server, token, version string, opts *sdk.ClientOptions) *sdk.ClientSession {
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	tr := &sdk.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := client.Connect(context.Background(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestHTTP(t *testing.T) {
	const token = "s3cret-token"
	hs := newHTTPServer(t, nil, token)
	resp, err := http.Post(hs.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without the token got %s, want 401", resp.Status)
	}
	// The SDK's latest protocol (stateless requests, multi round-trip
	// elicitation) and an older one (sessions, server-initiated requests).
	for _, version := range protocolVersions {
		t.Run(versionName(version), func(t *testing.T) {
			progress := newProgressLog()
			cs := connectHTTP(t, hs, token, version, &sdk.ClientOptions{ProgressNotificationHandler: progress.handler})
			exercise(t, cs, progress)
		})
	}
}

// protocolVersions are the MCP versions the HTTP tests speak: the SDK's
// latest and the one most hosts spoke before it.
var protocolVersions = []string{"", "2025-06-18"}

func versionName(v string) string {
	if v == "" {
		return "latest"
	}
	return v
}

func TestApprovalByElicitation(t *testing.T) {
	hs := newHTTPServer(t, &mcp.Options{AskApproval: true}, "")
	for _, version := range protocolVersions {
		t.Run(versionName(version), func(t *testing.T) { testApproval(t, hs, version) })
	}
}

func testApproval(t *testing.T, hs *httptest.Server, version string) {
	var mu sync.Mutex
	var asked []string
	cs := connectHTTP(t, hs, "", version, &sdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, req.Params.Message)
		mu.Unlock()
		if strings.Contains(req.Params.Message, "echo yes") || strings.Contains(req.Params.Message, "ok.txt") {
			return &sdk.ElicitResult{Action: "accept"}, nil
		}
		return &sdk.ElicitResult{Action: "decline"}, nil
	}})
	if out, _ := mustTool(t, cs, tools.NameExecute, obj{"command": "echo yes"}); out != "yes\n" {
		t.Fatalf("approved command: %q", out)
	}
	res := callTool(t, cs, tools.NameExecute, obj{"command": "echo no > /tmp/w/declined"})
	if !res.IsError || !strings.Contains(text(res), "did not approve") {
		t.Fatalf("declined command: %s", text(res))
	}
	mustTool(t, cs, tools.NameWriteFile, obj{"path": "ok.txt", "content": "x"})
	if res := callTool(t, cs, tools.NameWriteFile, obj{"path": "other.txt", "content": "x"}); !res.IsError {
		t.Fatalf("declined write: %s", text(res))
	}
	// Reading needs no approval.
	mustTool(t, cs, tools.NameReadFile, obj{"path": "ok.txt"})
	if out, _ := mustTool(t, cs, tools.NameExecute, obj{"command": "echo yes; ls /tmp/w"}); strings.Contains(out, "declined") || strings.Contains(out, "other.txt") {
		t.Fatalf("a declined action happened: %q", out)
	}
	mu.Lock()
	if len(asked) != 5 || !strings.Contains(asked[0], `run the command "echo yes"`) || !strings.Contains(asked[2], "write the file /tmp/w/ok.txt") {
		t.Errorf("asked: %q", asked)
	}
	mu.Unlock()

	// A client that cannot ask is refused.
	cs2 := connectHTTP(t, hs, "", version, nil)
	if res := callTool(t, cs2, tools.NameExecute, obj{"command": "echo yes"}); !res.IsError || !strings.Contains(text(res), "does not support elicitation") {
		t.Fatalf("client without elicitation: %s", text(res))
	}
}

func TestServeNeedsTokenBeyondLoopback(t *testing.T) {
	srv, closeAll, err := newServer(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := srv.Serve(context.Background(), ln, nil); !errors.Is(err, mcp.ErrTokenRequired) {
		t.Fatalf("Serve on %s without a token: %v, want ErrTokenRequired", ln.Addr(), err)
	}
	// On loopback it serves until the context ends.
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lo, nil) }()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: "http://" + lo.Addr().String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
}
