package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// childServeEnv names the state dir of a test binary re-executed as a
// serve process (childServe).
const childServeEnv = "AGENTBOX_TEST_CHILD_SERVE"

// childServe is the main of the test binary re-executed as a serve: a
// Server over the local engine in stateDir on a loopback port, which it
// prints, until SIGTERM. It returns the exit code.
func childServe(stateDir string) int {
	s, err := New(Options{StateDir: stateDir, APIKeys: []string{testKey},
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer s.Close(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); hs.Close() }()
	fmt.Printf("serving http://%s\n", ln.Addr())
	_ = hs.Serve(ln)
	return 0
}

// serveProcess is a serve run by a re-executed test binary.
type serveProcess struct {
	cmd    *osexec.Cmd
	url    string
	stderr *syncBuffer
	exited chan struct{} // closed when it has exited, with err
	err    error
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// report is what a failure shows of a serve's stderr: from the first
// crash report (a panic, a fatal error, a data race) on when there is
// one, since the goroutine dump that follows it would push the cause out
// of a truncated log, else its last lines; at most maxReport bytes, with
// the whole saved in the test's artifact dir with -test.artifacts.
func (p *serveProcess) report(t *testing.T) string {
	const maxReport = 8 << 10
	s := p.stderr.String()
	saved := ""
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" { // else the dir goes with the test
		file := filepath.Join(t.ArtifactDir(), fmt.Sprintf("serve-%d.stderr", p.cmd.Process.Pid))
		if err := os.WriteFile(file, []byte(s), 0o644); err == nil {
			saved = " (all of it in " + file + ")"
		}
	}
	for _, mark := range []string{"panic: ", "fatal error: ", "WARNING: DATA RACE"} {
		if i := strings.Index(s, mark); i >= 0 {
			if j := strings.LastIndexByte(s[:i], '\n'); j >= 0 {
				i = j + 1
			}
			s = s[i:]
			if len(s) > maxReport {
				s = s[:maxReport] + "\n…"
			}
			return fmt.Sprintf("stderr from its crash report on%s:\n%s", saved, s)
		}
	}
	if len(s) > maxReport {
		s = "…" + s[len(s)-maxReport:]
	}
	return fmt.Sprintf("stderr%s:\n%s", saved, s)
}

// startServe starts a serve process on stateDir, killed when the test
// ends.
func startServe(t *testing.T, stateDir string) *serveProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: osexec.Command(exe), stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), childServeEnv+"="+stateDir)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "serving "); ok {
				urls <- u
			}
		}
		close(urls)
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			<-p.exited
			t.Fatalf("serve exited before serving: %v; %s", p.err, p.report(t))
		}
		p.url = u
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start; %s", p.report(t))
	}
	return p
}

// kill ends p with SIGKILL, as a crash or kill -9 would.
func (p *serveProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		<-p.exited
		t.Fatalf("serve ended before the kill: %v (%v); %s", err, p.err, p.report(t))
	}
	<-p.exited
}

// processHarness returns a harness validating every exchange with the
// serve process its target returns, through a proxy whose URL stays the
// same across restarts.
func processHarness(t *testing.T, target func() string) *harness {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(target())
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // the server makes its URLs of the proxy's
		},
		FlushInterval: -1,
	}
	srv := validatedServer(t, harnessOptions{}, rp)
	t.Cleanup(srv.Close)
	return &harness{t: t, url: srv.URL, client: srv.Client()}
}

func TestKilledServeLosesNothing(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	keyB := newOrgKey(t, dir, "b", "team-b")
	var mu sync.Mutex
	serve := startServe(t, dir)
	h := processHarness(t, func() string { mu.Lock(); defer mu.Unlock(); return serve.url })

	var vol volumeDTO
	if st := h.call("POST", "/volumes", map[string]string{"name": "kept"}, &vol); st != http.StatusOK {
		t.Fatalf("create volume: %d", st)
	}
	kept := h.create(map[string]any{"name": "kept", "labels": map[string]string{"team": "infra"}, "env": map[string]string{"GREETING": "hello"},
		"autoStopInterval": 30, "volumes": []map[string]string{{"volumeId": "kept", "mountPath": "/data"}}})
	parked := h.create(map[string]any{"name": "parked", "autoDeleteInterval": 90, "autoArchiveInterval": 120})
	var other apiSandbox
	if st := h.callKey(keyB, "POST", "/sandbox", map[string]any{"name": "kept"}, &other); st != http.StatusOK {
		t.Fatalf("create as team-b: %d", st)
	}
	h.waitState(kept.ID, stateStarted)
	h.waitState(parked.ID, stateStarted)
	h.waitStateKey(keyB, other.ID, stateStarted)
	h.call("POST", "/sandbox/parked/stop", nil, nil)
	h.waitState(parked.ID, stateStopped)
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: h.url + "/toolbox/" + kept.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	initStart := func() string { return exec(t, c, "cut -d' ' -f22 /proc/1/stat") }
	exec(t, c, "echo kept > ~/kept.txt; echo shared > /data/file")
	started := initStart()
	before := map[string]apiSandbox{}
	for _, sb := range []apiSandbox{kept, parked} {
		before[sb.ID], _ = h.get(sb.ID)
	}

	// A second serve on the same state dir is refused, harmlessly.
	second := startServeFailing(t, dir)
	if !strings.Contains(second, ErrStoreInUse.Error()) {
		t.Fatalf("a second serve on the state dir: %q, want %q", second, ErrStoreInUse)
	}

	// Killed with a create in flight.
	inflight := h.create(map[string]any{"name": "inflight"})
	serve.kill(t)
	mu.Lock()
	serve = startServe(t, dir)
	mu.Unlock()

	for id, want := range before {
		got, st := h.get(id)
		if got.LastActivityAt > want.LastActivityAt {
			// The toolbox records the end of the last command after
			// answering it: activity, which the new serve saw.
			want.LastActivityAt = got.LastActivityAt
		}
		if st != http.StatusOK || !jsonEqual(t, got, want) {
			t.Errorf("sandbox %s after a kill -9 and restart: %d\n got %+v\nwant %+v", want.Name, st, got, want)
		}
	}
	// The running sandbox ran on, files and all, and its toolbox answers
	// through the new serve.
	if got := initStart(); got != started {
		t.Errorf("the sandbox's init started at %s, before the kill at %s: it did not run on", got, started)
	}
	if out := exec(t, c, `cat ~/kept.txt /data/file; echo "$GREETING"`); out != "kept\nshared\nhello\n" {
		t.Errorf("after the restart, files and env: %q", out)
	}
	// The organizations, and their keys, hold.
	if _, st := h.get(other.ID); st != http.StatusNotFound {
		t.Errorf("team-b's sandbox with the default key after the restart: %d, want 404", st)
	}
	if got := h.waitStateKey(keyB, other.ID, stateStarted); got.Name != "kept" {
		t.Errorf("team-b's sandbox after the restart: %+v", got)
	}
	// The create the kill interrupted is done by the new serve.
	h.waitState(inflight.ID, stateStarted)
	// A timer still runs: the stopped sandbox's auto-delete interval
	// made 0 deletes it now.
	h.call("POST", "/sandbox/parked/autodelete/0", nil, nil)
	h.call("POST", "/sandbox/parked/start", nil, nil)
	h.waitState(parked.ID, stateStarted)
	h.call("POST", "/sandbox/parked/stop", nil, nil)
	h.waitState(parked.ID, "gone")

	for _, sb := range []apiSandbox{kept, inflight} {
		h.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
		h.waitState(sb.ID, "gone")
	}
	h.callKey(keyB, "DELETE", "/sandbox/"+other.ID, nil, nil)
	h.waitStateKey(keyB, other.ID, "gone")
	if st := h.call("DELETE", "/volumes/"+vol.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("delete volume: %d", st)
	}
	if err := serve.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-serve.exited
	if serve.err != nil {
		t.Fatalf("serve after SIGTERM: %v; %s", serve.err, serve.report(t))
	}
}

// startServeFailing starts a serve process on stateDir that must fail to
// start, and returns what it printed.
func startServeFailing(t *testing.T, stateDir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(exe)
	cmd.Env = append(os.Environ(), childServeEnv+"="+stateDir)
	out, err := cmd.CombinedOutput()
	var exit *osexec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("a second serve on %s: %v, want exit 3: %s", stateDir, err, out)
	}
	return string(out)
}

// `agentbox serve keys create|rm` in another process than a running
// serve's: the serve accepts the new key, and refuses the removed one,
// from the next request on, without a restart.
func TestKeysOfARunningServeProcess(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	serve := startServe(t, dir)
	h := processHarness(t, func() string { return serve.url })
	ctx := context.Background()
	k, key, err := CreateAPIKey(ctx, dir, "live", "team-live")
	if err != nil {
		t.Fatalf("creating a key while serve runs: %v", err)
	}
	var list listSandboxes
	if st := h.callKey(key, "GET", "/sandbox", nil, &list); st != http.StatusOK || len(list.Items) != 0 {
		t.Fatalf("the new key: %d %+v", st, list)
	}
	if keys, err := ListAPIKeys(ctx, dir); err != nil || len(keys) != 1 || keys[0] != k {
		t.Fatalf("keys listed while serve runs: %+v %v", keys, err)
	}
	if err := RemoveAPIKey(ctx, dir, "live"); err != nil {
		t.Fatalf("removing a key while serve runs: %v", err)
	}
	if st := h.callKey(key, "GET", "/sandbox", nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("the removed key: %d, want 401", st)
	}
	if st := h.call("GET", "/sandbox", nil, nil); st != http.StatusOK {
		t.Fatalf("serve's own key: %d", st)
	}
	if err := serve.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-serve.exited
	if serve.err != nil {
		t.Fatalf("serve after SIGTERM: %v; %s", serve.err, serve.report(t))
	}
}
