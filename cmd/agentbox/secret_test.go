package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// cliSecret is the value the CLI's secret tests give: no output may hold
// it.
const cliSecret = "sk-cli-test-0b7e3d9a51"

// noValue fails the test when r's output holds the value.
func noValue(t *testing.T, what string, r result) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, cliSecret) {
		t.Fatalf("%s printed the value: %+v", what, r)
	}
}

// listed returns what "secret ls --json" lists.
func (e *env) listed(engine string) []cli.SecretInfo {
	e.t.Helper()
	r := e.must("--engine", engine, "secret", "ls", "--json")
	var out []cli.SecretInfo
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("secret ls --json: %v: %q", err, r.stdout)
	}
	return out
}

// TestSecretCreateFromStdinLocal: secret create reads the value from
// standard input (one final line break dropped) and stores it with its
// hosts and description, printing no value.
func TestSecretCreateFromStdinLocal(t *testing.T) {
	e := newEnv(t)
	r := e.run(cliSecret+"\n", "secret", "create", "OPENAI_API_KEY", "--host", "api.openai.com", "--host", "*.openai.com", "--description", "team key")
	if r.code != 0 || !strings.Contains(r.stdout, "created secret OPENAI_API_KEY") {
		t.Fatalf("create: %+v", r)
	}
	noValue(t, "create", r)
	st, err := local.OpenSecretStore(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Resolve(map[string]string{"K": "OPENAI_API_KEY"})
	if err != nil || got[0].Value != cliSecret || !slices.Equal(got[0].Hosts, []string{"api.openai.com", "*.openai.com"}) {
		t.Fatalf("stored: %v, %v (value right: %t)", got, err, err == nil && got[0].Value == cliSecret)
	}
}

// TestSecretCreateRefusesEmptyValueLocal: an empty standard input, or
// none, is a usage error that stores nothing; so is a create without
// --host.
func TestSecretCreateRefusesEmptyValueLocal(t *testing.T) {
	e := newEnv(t)
	for _, stdin := range []string{"", "\n"} {
		if r := e.run(stdin, "secret", "create", "K", "--host", "a.example.com"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "empty") {
			t.Errorf("stdin %q: %+v, want a usage error saying empty", stdin, r)
		}
	}
	if r := e.run(cliSecret, "secret", "create", "K"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--host") {
		t.Errorf("no --host: %+v", r)
	}
	if got := e.listed("local"); len(got) != 0 {
		t.Fatalf("stored %+v", got)
	}
}

// TestSecretLsLocal: secret ls lists name, hosts and description, as a
// table and as JSON, never the value.
func TestSecretLsLocal(t *testing.T) {
	e := newEnv(t)
	e.run(cliSecret, "secret", "create", "B_KEY", "--host", "b.example.com", "--allow-http")
	e.run(cliSecret, "secret", "create", "A_KEY", "--host", "a.example.com", "--description", "note")
	r := e.must("secret", "ls")
	noValue(t, "ls", r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "A_KEY") || !strings.Contains(lines[1], "note") || !strings.Contains(lines[2], "b.example.com") {
		t.Fatalf("ls: %q", r.stdout)
	}
	rj := e.must("secret", "ls", "--json")
	noValue(t, "ls --json", rj)
	got := e.listed("local")
	if len(got) != 2 || got[0].Name != "A_KEY" || got[0].Description != "note" || !got[1].AllowHTTP || got[1].Updated.IsZero() {
		t.Fatalf("ls --json: %+v", got)
	}
}

// TestSecretRmLocal: secret rm removes secrets; an unknown one is "not
// found"; a second create of a name says it exists.
func TestSecretRmLocal(t *testing.T) {
	e := newEnv(t)
	e.run(cliSecret, "secret", "create", "A_KEY", "--host", "a.example.com")
	if r := e.run(cliSecret, "secret", "create", "A_KEY", "--host", "a.example.com"); r.code != cli.ExitError || !strings.Contains(r.stderr, "exists already") {
		t.Errorf("second create: %+v", r)
	}
	e.run(cliSecret, "secret", "create", "B_KEY", "--host", "b.example.com")
	if r := e.must("secret", "rm", "A_KEY", "B_KEY"); r.stdout != "removed A_KEY\nremoved B_KEY\n" {
		t.Errorf("rm: %q", r.stdout)
	}
	if got := e.listed("local"); len(got) != 0 {
		t.Fatalf("after rm: %+v", got)
	}
	if r := e.run("", "secret", "rm", "A_KEY"); r.code != cli.ExitError || !strings.Contains(r.stderr, `no secret "A_KEY"`) {
		t.Errorf("rm unknown: %+v", r)
	}
}

// TestSecretUpdateLocal: secret update replaces the hosts, and the value
// from standard input with --value-stdin; with neither it is a usage
// error.
func TestSecretUpdateLocal(t *testing.T) {
	e := newEnv(t)
	e.run(cliSecret, "secret", "create", "A_KEY", "--host", "a.example.com")
	if r := e.run("", "secret", "update", "A_KEY"); r.code != cli.ExitUsage {
		t.Errorf("update without a change: %+v", r)
	}
	e.must("secret", "update", "A_KEY", "--host", "new.example.com")
	if r := e.run(cliSecret+"-2", "secret", "update", "A_KEY", "--value-stdin"); r.code != 0 {
		t.Fatalf("update value: %+v", r)
	}
	st, _ := local.OpenSecretStore(e.stateDir)
	got, err := st.Resolve(map[string]string{"A_KEY": "A_KEY"})
	if err != nil || got[0].Value != cliSecret+"-2" || !slices.Equal(got[0].Hosts, []string{"new.example.com"}) {
		t.Fatalf("after update: %v, %v", got, err)
	}
}

// TestExecSecretUnknownLocal: exec --secret naming no stored secret
// fails naming the flag and the secret, and creates no sandbox; a bad
// --secret, or one with --block-network, is a usage error.
func TestExecSecretUnknownLocal(t *testing.T) {
	e := newEnv(t)
	r := e.run("", "exec", "--secret", "KEY=MISSING_SECRET", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "--secret") || !strings.Contains(r.stderr, `"MISSING_SECRET"`) {
		t.Fatalf("unknown secret: %+v", r)
	}
	if infos, err := local.List(context.Background(), e.stateDir); err != nil || len(infos) != 0 {
		t.Fatalf("sandboxes made: %v, %v", infos, err)
	}
	if r := e.run("", "exec", "--block-network", "--secret", "K", "--", "true"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--block-network") {
		t.Errorf("--secret with --block-network: %+v", r)
	}
	for _, bad := range []string{"1BAD", "K=", "K=a,K=b"} {
		args := []string{"exec"}
		for _, v := range strings.Split(bad, ",") {
			args = append(args, "--secret", v)
		}
		if r := e.run("", append(args, "--", "true")...); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--secret") {
			t.Errorf("--secret %s: %+v, want a usage error naming --secret", bad, r)
		}
	}
}

// TestExecSecretLocal: exec --secret NAME runs the command of a new
// sandbox with NAME set to a placeholder, never the value; ENV=NAME sets
// ENV. It needs the local engine's secrets (Config.Secrets, SetSecrets).
func TestExecSecretLocal(t *testing.T) {
	e := newEnv(t)
	e.must("exec", "--id", "probe", "--", "true")
	sb, err := local.Open(context.Background(), e.stateDir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.SetSecrets(context.Background(), nil); errors.Is(err, sandbox.ErrUnsupported) {
		testenv.Skipf(t, "the local engine's secrets are not built in this tree (SetSecrets: %v): this test needs branch wt-local", err)
	}
	e.run(cliSecret, "secret", "create", "API_KEY", "--host", "api.example.com")
	r := e.must("exec", "--id", "with-secret", "--secret", "API_KEY", "--secret", "OTHER=API_KEY", "--", "sh", "-c", `printenv API_KEY; printenv OTHER; cat /proc/self/environ | tr '\0' '\n'`)
	noValue(t, "exec --secret", r)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 2 || lines[0] == "" || lines[1] == "" || lines[0] == lines[1] {
		t.Fatalf("placeholders %q, want two different ones", lines[:min(2, len(lines))])
	}
}

// fakeDaytonaSecrets is a stand-in of a Daytona control plane's /secret
// routes, for the daytona engine's secret commands.
type fakeDaytonaSecrets struct {
	mu     sync.Mutex
	byName map[string]map[string]any
	values map[string]string
}

func (f *fakeDaytonaSecrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch id := strings.TrimPrefix(r.URL.Path, "/api/secret/"); {
	case r.Method == "POST" && r.URL.Path == "/api/secret":
		var body struct {
			Name, Value string
			Hosts       []string
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if f.byName[body.Name] != nil {
			answer(409, map[string]any{"statusCode": 409, "message": "exists"})
			return
		}
		s := map[string]any{"id": "id-" + body.Name, "name": body.Name, "hosts": body.Hosts, "placeholder": "dtn_secret_x",
			"createdAt": "2026-12-01T00:00:00Z", "updatedAt": "2026-12-01T00:00:00Z"}
		f.byName[body.Name], f.values[body.Name] = s, body.Value
		answer(201, s)
	case r.Method == "GET" && r.URL.Path == "/api/secret/paginated":
		items := []any{}
		for _, s := range f.byName {
			if strings.Contains(s["name"].(string), r.URL.Query().Get("name")) {
				items = append(items, s)
			}
		}
		answer(200, map[string]any{"items": items, "total": len(items), "nextCursor": nil})
	case r.Method == "DELETE" && f.byName[strings.TrimPrefix(id, "id-")] != nil:
		delete(f.byName, strings.TrimPrefix(id, "id-"))
		w.WriteHeader(204)
	default:
		answer(404, map[string]any{"statusCode": 404, "message": "not found"})
	}
}

// TestDaytonaSecretCLI: on the daytona engine, secret create sends the
// value from standard input to the control plane, ls lists the secrets
// without it, rm deletes by name, and a taken name says it exists.
func TestDaytonaSecretCLI(t *testing.T) {
	e := newEnv(t)
	f := &fakeDaytonaSecrets{byName: map[string]map[string]any{}, values: map[string]string{}}
	ts := httptest.NewServer(f)
	defer ts.Close()
	t.Setenv("DAYTONA_API_URL", ts.URL+"/api")
	t.Setenv("DAYTONA_API_KEY", "cli-test-key")
	dt := func(stdin string, args ...string) result {
		return e.run(stdin, append([]string{"--engine", "daytona"}, args...)...)
	}
	r := dt(cliSecret+"\n", "secret", "create", "openai-prod", "--host", "api.openai.com")
	if r.code != 0 || f.values["openai-prod"] != cliSecret {
		t.Fatalf("create: %+v; the server got the value: %t", r, f.values["openai-prod"] == cliSecret)
	}
	noValue(t, "create", r)
	if r := dt(cliSecret, "secret", "create", "openai-prod", "--host", "api.openai.com"); r.code != cli.ExitError || !strings.Contains(r.stderr, "exists already") {
		t.Errorf("second create: %+v", r)
	}
	if r := dt(cliSecret, "secret", "create", "h", "--host", "a.example.com", "--allow-http"); r.code == 0 || !strings.Contains(r.stderr, "--allow-http") {
		t.Errorf("--allow-http on daytona: %+v", r)
	}
	if got := e.listed("daytona"); len(got) != 1 || got[0].Name != "openai-prod" || got[0].ID != "id-openai-prod" || got[0].Placeholder == "" {
		t.Fatalf("ls: %+v", got)
	}
	if r := dt("", "secret", "rm", "openai-prod"); r.code != 0 || len(f.byName) != 0 {
		t.Fatalf("rm: %+v, left %v", r, f.byName)
	}
	if r := dt("", "secret", "rm", "openai-prod"); r.code != cli.ExitError || !strings.Contains(r.stderr, "no secret") {
		t.Errorf("rm unknown: %+v", r)
	}
}

// TestDaytonaSecretCLIOverServe: against agentbox serve, the daytona
// engine's secret create, ls and rm manage serve's secrets, and exec
// --secret ENV=NAME creates a sandbox whose ENV holds a placeholder,
// never the value.
func TestDaytonaSecretCLIOverServe(t *testing.T) {
	testenv.NeedRoot(t, "needs root: agentbox serve's sandboxes present as Daytona's user")
	e := newEnv(t)
	serveFor(t, e)
	dt := func(stdin string, args ...string) result {
		t.Helper()
		r := e.run(stdin, append([]string{"--engine", "daytona"}, args...)...)
		noValue(t, strings.Join(args, " "), r)
		return r
	}
	if r := dt(cliSecret, "secret", "create", "api-key", "--host", "api.example.com"); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	if got := e.listed("daytona"); len(got) != 1 || got[0].Name != "api-key" || !slices.Equal(got[0].Hosts, []string{"api.example.com"}) {
		t.Fatalf("ls: %+v", got)
	}
	r := dt("", "exec", "--id", "sec", "--secret", "API_KEY=api-key", "--", "sh", "-c", "printenv API_KEY; tr '\\0' '\\n' < /proc/self/environ")
	if r.code != 0 || strings.TrimSpace(strings.SplitN(r.stdout, "\n", 2)[0]) == "" {
		t.Fatalf("exec --secret: %+v, want a placeholder", r)
	}
	dt("", "sandbox", "rm", "sec")
	if r := dt("", "secret", "rm", "api-key"); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if got := e.listed("daytona"); len(got) != 0 {
		t.Fatalf("after rm: %+v", got)
	}
}
