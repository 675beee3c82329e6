package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/sandbox/sandboxtest"
)

// offline is a client of a server that is never called.
func offline(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(Config{APIKey: "k", APIURL: "http://127.0.0.1:9/api"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEngineOptions(t *testing.T) {
	noDaytonaEnv(t)
	if _, err := New(Options{}); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no key: %v, want ErrNoCredentials", err)
	}
	c := offline(t)
	sb, err := New(Options{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sb.ID(), "daytona-sandbox-") || sb.Name() != "DaytonaSandbox" || sb.Provider() != "daytona" || sb.Status() != sandbox.StatusPending {
		t.Fatalf("identity: %s %s %s %s", sb.ID(), sb.Name(), sb.Provider(), sb.Status())
	}
	if got, want := sb.Instructions(), "Cloud sandbox with isolated execution (typescript runtime). Command timeout: 300s. Running as user: daytona."; got != want {
		t.Errorf("default instructions:\n%s\nwant\n%s", got, want)
	}
	if _, err := sb.Instance(); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("Instance before start: %v, want ErrNotReady", err)
	}
	if _, err := sb.Client().WorkDir(context.Background()); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("toolbox call before start: %v, want ErrNotReady", err)
	}
	info, err := sb.Info(context.Background())
	if err != nil || info.Usage != nil || info.Metadata["language"] != "typescript" || info.Metadata["ephemeral"] != "false" || info.Metadata["target"] != "" {
		t.Errorf("info before start: %+v, %v", info, err)
	}
	sb, err = New(Options{Client: c, Language: "python", WorkingDirectory: "/home/daytona", Timeout: 60 * time.Second, User: "ubuntu",
		Volumes: []SandboxVolume{{VolumeID: "v", MountPath: "/data"}}, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sb.Instructions(), "Cloud sandbox with isolated execution (python runtime). Default working directory: /home/daytona. Command timeout: 60s. Running as user: ubuntu. 1 volume(s) attached. Network access is blocked."; got != want {
		t.Errorf("instructions:\n%s\nwant\n%s", got, want)
	}
	clone, err := sb.Clone(CloneOptions{ID: "twin", Env: map[string]string{"A": "b"}, IdleTimeout: 5 * time.Minute})
	if err != nil || clone.ID() != "twin" || clone.Status() != sandbox.StatusPending || clone.Instructions() != sb.Instructions() ||
		clone.opts.Name != "twin" || clone.opts.AutoStopInterval != 5*time.Minute || clone.Lifecycle.Env()["A"] != "b" || clone.api != c {
		t.Fatalf("clone: %+v, %v", clone, err)
	}
	for _, bad := range []struct {
		o    Options
		want string
	}{
		{Options{Env: map[string]string{"1BAD": "x"}}, `"1BAD"`},
		{Options{Language: "cobol"}, "cobol"},
		{Options{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}}}, `"invalid Prefix": not a CIDR`},
		{Options{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Domains: []string{"example.com", "bad domain"}}}, `"bad domain": character ' ' is not allowed in a name`},
		{Options{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}, "no host network mode"},
		{Options{Volumes: []SandboxVolume{{VolumeID: "v", MountPath: "relative"}}}, "absolute mount path"},
		{Options{Volumes: []SandboxVolume{{MountPath: "/data"}}}, "needs an id or name"},
		{Options{WorkingDirectory: "relative"}, "not absolute"},
		{Options{Resources: sandbox.Resources{CPUCores: -1}}, "negative"},
	} {
		bad.o.Client = c
		_, err := New(bad.o)
		if !errors.Is(err, sandbox.ErrInvalidArgument) && !errors.Is(err, sandbox.ErrInvalidEnv) || !strings.Contains(fmt.Sprint(err), bad.want) {
			t.Errorf("New(%+v): %v, want an invalid-argument error saying %s", bad.o, err, bad.want)
		}
	}
}

func TestCreateRequest(t *testing.T) {
	res := sandbox.Resources{CPUCores: 2, MemoryMiB: 4 << 10, DiskMiB: 8 << 10}
	for _, tc := range []struct {
		name         string
		o            Options
		snapshot     string
		image        bool
		cpu          int
		dropped      bool
		stop, delete string
	}{
		{"default", Options{}, "", false, 0, false, "15", "unset"},
		{"image", Options{Image: "python:3.12", Resources: res}, "", true, 2, false, "15", "unset"},
		{"snapshot wins", Options{Snapshot: "s", Image: "python:3.12", Resources: res}, "s", false, 0, true, "15", "unset"},
		{"resources without image", Options{Resources: res}, "", false, 0, true, "15", "unset"},
		{"ephemeral, never stop", Options{Ephemeral: true, AutoStopInterval: -1}, "", false, 0, false, "0", "0"},
		{"auto delete", Options{AutoDeleteInterval: 90 * time.Second}, "", false, 0, false, "15", "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.o.normalize()
			if err != nil {
				t.Fatal(err)
			}
			req, dropped := o.createRequest("eu")
			show := func(p *int) string {
				if p == nil {
					return "unset"
				}
				return strconv.Itoa(*p)
			}
			if req.Snapshot != tc.snapshot || (req.BuildInfo != nil) != tc.image || req.CPU != tc.cpu || dropped != tc.dropped ||
				show(req.AutoStopInterval) != tc.stop || show(req.AutoDeleteInterval) != tc.delete || req.Target != "eu" || len(req.Env) != 0 {
				t.Fatalf("request %+v (dropped %v)", req, dropped)
			}
			if req.Name != o.ID || req.Labels[LabelSandboxID] != o.ID || req.Labels[labelLanguage] != "typescript" {
				t.Fatalf("name and labels: %q %v", req.Name, req.Labels)
			}
			if tc.image && req.BuildInfo.DockerfileContent != "FROM python:3.12\n" {
				t.Fatalf("dockerfile %q", req.BuildInfo.DockerfileContent)
			}
		})
	}
}

// newEngine returns a pending sandbox of s's with opts, destroyed at the
// test's end.
func newEngine(t *testing.T, s *serve, cfg Config, opts Options) *Sandbox {
	t.Helper()
	opts.Client = s.client(cfg)
	sb, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("destroy: %v", err)
		}
		sb.Close(ctx)
	})
	return sb
}

// toolboxModes are serve's two toolboxes: its own, and the one that
// behaves as Daytona's daemon (no extensions, its quirks).
var toolboxModes = []struct {
	name    string
	daytona bool
}{{"agentbox", false}, {"daytona", true}}

func TestEngine(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	for _, mode := range toolboxModes {
		t.Run(mode.name, func(t *testing.T) { testEngine(t, mode.daytona) })
	}
}

func testEngine(t *testing.T, daytonaMode bool) {
	s := newServe(t, &server.Knobs{CountRequests: true, DaytonaToolbox: daytonaMode})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := newEngine(t, s, Config{}, Options{ID: "engine", Env: map[string]string{"GREETING": "hello"}, Labels: map[string]string{"team": "a"}})
	out, err := sb.Start(ctx)
	if err != nil || out != sandbox.OutcomeCreated {
		t.Fatalf("start: %v, %v", out, err)
	}
	remote, err := sb.API().GetSandbox(ctx, "engine")
	if err != nil || remote.Labels[LabelSandboxID] != "engine" || remote.Labels["team"] != "a" || len(remote.Env) != 0 || remote.AutoStopInterval != 15 {
		t.Fatalf("the sandbox created: %+v, %v", remote, err)
	}
	res, err := sb.ExecuteCommand(ctx, "echo $GREETING $WHO; echo err >&2; pwd", nil, &sandbox.ExecOptions{Env: map[string]string{"WHO": "world"}})
	if err != nil || res.ExitCode != 0 || res.Stdout != "hello world\n/home/daytona\n" || res.Stderr != "err\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if !strings.Contains(sb.Instructions(), "Default working directory: /home/daytona.") {
		t.Errorf("instructions without the probed working directory: %s", sb.Instructions())
	}
	info, err := sb.Info(ctx)
	if err != nil || info.Usage == nil || info.Metadata["target"] != remote.Target || info.CreatedAt.IsZero() ||
		info.Usage.MemoryMB != int64(remote.Memory*1024) || info.Usage.CPUCores != remote.CPU {
		t.Fatalf("info: %+v (resources %+v), %v", info, info.Usage, err)
	}

	// Round trips on a started sandbox: a command that streams nothing
	// costs one request.
	s.srv.ResetRequestCounts()
	if res, err := sb.ExecuteCommand(ctx, "true", nil, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("true: %+v, %v", res, err)
	}
	// Daytona's own toolbox has no one-request exec: it takes a session
	// exec and, for the exit code, a look at the command.
	want := 1
	if daytonaMode {
		want = 3
	}
	if c := s.srv.RequestCounts(sb.RemoteID()); c.Total() > want {
		t.Errorf("a command took %d requests, want at most %d: %v", c.Total(), want, c)
	}
	// A streaming command: 2 requests with agentbox's extensions.
	s.srv.ResetRequestCounts()
	var out1 strings.Builder
	if res, err := sb.ExecuteCommand(ctx, "echo hi", nil, &sandbox.ExecOptions{Stdout: &out1}); err != nil || out1.String() != "hi\n" {
		t.Fatalf("streaming echo: %+v (streamed %q), %v", res, out1.String(), err)
	}
	// Daytona's toolbox: 3 when the command ended before the follow's
	// first look (TestRoundTrips), else the follow socket, looks at the
	// command and a last read of the log, which depends on timing.
	c := s.srv.RequestCounts(sb.RemoteID())
	if daytonaMode {
		t.Logf("a streaming command on Daytona's toolbox took %d requests: %v", c.Total(), c)
	} else if c.Total() > 2 {
		t.Errorf("a streaming command took %d requests, want at most 2: %v", c.Total(), c)
	}
	// Streaming output survives a log stream dropped in its middle, no
	// byte lost or repeated.
	if err := s.srv.InjectFault(server.Fault{Kind: server.FaultWebSocketDrop, Times: 1}); err != nil {
		t.Fatal(err)
	}
	s.srv.ResetRequestCounts()
	var streamed strings.Builder
	res, err = sb.ExecuteCommand(ctx, "for i in 1 2 3 4; do echo line$i; sleep 0.1; done", nil, &sandbox.ExecOptions{Stdout: &streamed})
	if want := "line1\nline2\nline3\nline4\n"; err != nil || res.Stdout != want || streamed.String() != want {
		t.Fatalf("streaming across a dropped stream: %+v (streamed %q), %v", res, streamed.String(), err)
	}
	if n := countRoutes(s.srv.RequestCounts(sb.RemoteID()), "/logs"); n < 2 {
		t.Errorf("the log stream was read %d times: the dropped stream was not resumed", n)
	}

	// A second handle reconnects by name and sees the same background
	// processes.
	p, err := sb.Processes().Spawn(ctx, "sleep 30", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(Options{ID: "engine", Client: s.client(Config{})})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if out, err := other.Start(ctx); err != nil || out != sandbox.OutcomeConnected {
		t.Fatalf("reconnect: %v, %v", out, err)
	}
	list, err := other.Processes().List(ctx)
	if err != nil || !hasPID(list, p.PID()) {
		t.Fatalf("the second handle lists %+v (%v), want %s", list, err, p.PID())
	}
	if killed, err := other.Processes().Kill(ctx, p.PID()); err != nil || !killed {
		t.Fatalf("kill through the second handle: %v %v", killed, err)
	}

	// Stopped behind our back (auto-stop): revived once, same sandbox.
	id := sb.RemoteID()
	if err := s.srv.InjectFault(server.Fault{Kind: server.FaultStop, Path: "/toolbox/", Times: 1}); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.ExecuteCommand(ctx, "echo again", nil, nil); err != nil || res.Stdout != "again\n" {
		t.Fatalf("after an auto-stop: %+v, %v", res, err)
	}
	if sb.RemoteID() != id {
		t.Errorf("an auto-stopped sandbox was replaced: %s, was %s", sb.RemoteID(), id)
	}
	// Deleted behind our back: created anew under the same name.
	if err := s.srv.InjectFault(server.Fault{Kind: server.FaultDelete, Path: "/toolbox/", Times: 1}); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.ExecuteCommand(ctx, "echo anew", nil, nil); err != nil || res.Stdout != "anew\n" {
		t.Fatalf("after a deletion: %+v, %v", res, err)
	}
	if sb.RemoteID() == id || sb.RemoteID() == "" {
		t.Errorf("a deleted sandbox was not recreated: id %s", sb.RemoteID())
	}
	// A second fault in a row is reported, not retried again.
	if err := s.srv.InjectFault(server.Fault{Kind: server.FaultStop, Path: "/exec", Times: 2}); err != nil {
		t.Fatal(err)
	}
	s.srv.ResetRequestCounts()
	if res, err := sb.ExecuteCommand(ctx, "echo twice", nil, nil); err == nil {
		t.Fatalf("a command failing twice: no error: %+v %v", res, s.srv.RequestCounts(sb.RemoteID()))
	}
	if res, err := sb.ExecuteCommand(ctx, "echo after", nil, nil); err != nil || res.Stdout != "after\n" {
		t.Fatalf("the command after: %+v, %v", res, err)
	}

	// Network settings change live; previews.
	if err := sb.UpdateNetworkSettings(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(sb.Instructions(), "Network access is blocked.") {
		t.Errorf("instructions after blocking the network: %s", sb.Instructions())
	}
	if got, err := sb.API().GetSandbox(ctx, sb.RemoteID()); err != nil || !got.NetworkBlockAll {
		t.Errorf("the server's sandbox after blocking: %+v, %v", got, err)
	}
	bad := sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{netip.MustParsePrefix("203.0.113.1/24")}}
	if err := sb.UpdateNetworkSettings(ctx, bad); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("a malformed allow list: %v", err)
	}
	if u, token, err := sb.PortURL(ctx, 3000); err != nil || u == "" || token == "" {
		t.Errorf("port URL: %q %q %v", u, token, err)
	}
	if u, err := sb.SignedPortURL(ctx, 3000, time.Minute); err != nil || u == "" {
		t.Errorf("signed port URL: %q %v", u, err)
	}

	// Stop keeps it; the next command starts it again.
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.API().GetSandbox(ctx, "engine"); err != nil || got.State != StateStopped {
		t.Fatalf("after Stop: %+v, %v", got, err)
	}
	if res, err := sb.ExecuteCommand(ctx, "echo restarted", nil, nil); err != nil || res.Stdout != "restarted\n" {
		t.Fatalf("after a stop: %+v, %v", res, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.API().WaitForState(ctx, "engine", StateDestroyed); err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("a second Destroy: %v", err)
	}
}

// countRoutes returns the requests of c whose route holds part.
func countRoutes(c server.RouteCount, part string) int {
	n := 0
	for route, v := range c {
		if strings.Contains(route, part) {
			n += v
		}
	}
	return n
}

func hasPID(list []sandbox.ProcessInfo, pid string) bool {
	for _, p := range list {
		if p.PID == pid {
			return true
		}
	}
	return false
}

func TestEngineBadInput(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	s := newServe(t, nil)
	ctx := context.Background()
	sb := newEngine(t, s, Config{}, Options{Volumes: []SandboxVolume{{VolumeID: "no-such-volume", MountPath: "/data"}}})
	if _, err := sb.Start(ctx); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "no-such-volume") {
		t.Fatalf("an unknown volume: %v, want a bad request naming it", err)
	}
	if page, err := sb.API().ListSandboxes(ctx, ListOptions{}, ""); err != nil || len(page.Items) != 0 {
		t.Fatalf("something was created: %+v, %v", page, err)
	}

	// Resources without an image: Mastra's warning, and the default
	// snapshot without them.
	var warnings []string
	sb = newEngine(t, s, Config{}, Options{Resources: sandbox.Resources{CPUCores: 2}, Logf: func(f string, a ...any) {
		warnings = append(warnings, fmt.Sprintf(f, a...))
	}})
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], resourcesWarning) {
		t.Errorf("warnings %q", warnings)
	}
	if got, err := sb.API().GetSandbox(ctx, sb.RemoteID()); err != nil || got.Snapshot != "" && got.Snapshot != server.DefaultSnapshot {
		t.Errorf("created from %+v, %v", got, err)
	}
	// An invalid per-command env name fails before anything runs.
	if _, err := sb.ExecuteCommand(ctx, "true", nil, &sandbox.ExecOptions{Env: map[string]string{"BAD-NAME": "x"}}); !errors.Is(err, sandbox.ErrInvalidEnv) {
		t.Errorf("an invalid env name: %v", err)
	}
}

// TestConformance runs sandboxtest against the engine over serve, with
// serve's own toolbox and with its Daytona-behaviour mode, whose
// documented limits (those of Daytona's daemon) the suite is told: output
// through a line reader (a last partial line ended by a newline, NUL
// bytes dropped), no exact stdin and no closing it.
func TestConformance(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	for _, mode := range toolboxModes {
		t.Run(mode.name, func(t *testing.T) {
			s := newServe(t, &server.Knobs{DaytonaToolbox: mode.daytona})
			opts := sandboxtest.Options{PersistentFiles: true, Reopen: func(sb sandbox.Sandbox) (sandbox.Sandbox, error) {
				return New(Options{ID: sb.ID(), Client: s.client(Config{})})
			}}
			if mode.daytona {
				opts.LineOutput, opts.NoStdinReader, opts.NoCloseStdin = true, true, true
			}
			sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
				sb, err := New(Options{Client: s.client(Config{})})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sb.Close(context.Background()) })
				return sb
			}, opts)
		})
	}
}
