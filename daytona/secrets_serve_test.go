package daytona

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestSecretsOverServe: against agentbox serve, a secret made through
// the SecretsService is listed without its value, a sandbox created with
// Options.Secrets sees a placeholder (never the value) in the variable,
// UpdateSecrets detaches it for processes spawned later (a new handle's
// session), and Delete removes the secret. It needs serve's /secret routes (branch wt-serve).
func TestSecretsOverServe(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	s := newServe(t, nil)
	c := s.client(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Secrets().List(ctx, ListSecretsOptions{}); errors.Is(err, ErrNotFound) {
		testenv.Skipf(t, "agentbox serve has no /secret routes in this tree (%v): this test needs branch wt-serve", err)
	}
	sec, err := c.Secrets().Create(ctx, SecretSpec{Name: "api-key", Value: secretValue, Hosts: []string{"api.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Secrets().ByName(ctx, "api-key"); err != nil || got.ID != sec.ID {
		t.Fatalf("by name: %+v, %v", got, err)
	}
	sb := newEngine(t, s, Config{}, Options{ID: "with-secret", Secrets: map[string]string{"API_KEY": "api-key"}})
	env := run(t, sb, "printenv API_KEY; cat /proc/self/environ | tr '\\0' '\\n'")
	if strings.Contains(env, secretValue) || strings.TrimSpace(strings.SplitN(env, "\n", 2)[0]) == "" {
		t.Fatalf("the sandbox's environment: %q, want a placeholder and never the value", env)
	}
	if err := sb.UpdateSecrets(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Processes spawned after the update see it (api.json): those of a
	// new handle's session, not of the session this one holds.
	again, err := New(Options{ID: "with-secret", Client: s.client(Config{})})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background()) // sb's cleanup destroys the sandbox
	if out := run(t, again, "printenv API_KEY || echo none"); out != "none" {
		t.Errorf("after detaching every secret: %q", out)
	}
	if err := c.Secrets().Delete(ctx, sec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Secrets().Get(ctx, sec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}
