package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// localSecretSandbox creates, on a server over the local engine, the
// secret "llm" and a started sandbox with the create's body, deleted when
// the test ends.
func localSecretSandbox(t *testing.T, body map[string]any) (*harness, apiSandbox) {
	t.Helper()
	needRoot(t)
	h := newHarness(t, localEngine{stateDir: newLocalStateDir(t)}, harnessOptions{})
	h.createTestSecret("llm")
	sb := h.create(body)
	h.waitState(sb.ID, stateStarted)
	t.Cleanup(func() {
		h.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
		h.waitState(sb.ID, "gone")
	})
	return h, sb
}

// printenvIn returns what printenv name prints in sandbox sb, failing t
// unless it is a placeholder (agentbox_secret_…) without the value.
func printenvIn(t *testing.T, h *harness, sb apiSandbox, name string) string {
	t.Helper()
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Execute(context.Background(), toolbox.ExecuteRequest{Command: "printenv " + name})
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(res.Result); !strings.HasPrefix(out, "agentbox_secret_") || strings.Contains(res.Result, testSecretValue) {
		t.Fatalf("printenv %s: %q (exit %d), want a placeholder agentbox_secret_…", name, res.Result, res.ExitCode)
	}
	return res.Result
}

// A sandbox of the local engine created with secrets holds a placeholder
// in its environment, never the value.
func TestLocalSandboxSecretIsPlaceholder(t *testing.T) {
	h, sb := localSecretSandbox(t, map[string]any{"name": "holder", "secrets": []map[string]string{{"LLM_KEY": "llm"}}})
	printenvIn(t, h, sb, "LLM_KEY")
	var entries []sandboxSecret
	if st := h.call("GET", "/sandbox/"+sb.ID+"/secrets", nil, &entries); st != http.StatusOK || len(entries) != 1 || entries[0].Env != "LLM_KEY" {
		t.Fatalf("GET secrets: %d %+v", st, entries)
	}
}

// A started sandbox of the local engine created without secrets gets
// them live from PUT /sandbox/{id}/secrets: a new command sees the
// placeholder.
func TestLocalSandboxSecretsAttachedLive(t *testing.T) {
	h, sb := localSecretSandbox(t, map[string]any{"name": "later"})
	if st := h.call("PUT", "/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{{"LLM_KEY": "llm"}}}, nil); st != http.StatusOK {
		t.Fatalf("attach: %d", st)
	}
	printenvIn(t, h, sb, "LLM_KEY")
}

// A stopped sandbox of the local engine that holds secrets gets them
// again when started: a command after the start sees the same
// placeholder as before the stop.
func TestLocalSandboxSecretsKeptAcrossAStop(t *testing.T) {
	h, sb := localSecretSandbox(t, map[string]any{"name": "kept", "secrets": []map[string]string{{"LLM_KEY": "llm"}}})
	before := printenvIn(t, h, sb, "LLM_KEY")
	h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	h.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil)
	h.waitState(sb.ID, stateStarted)
	if after := printenvIn(t, h, sb, "LLM_KEY"); after != before {
		t.Fatalf("the placeholder changed across a stop: %q, then %q", before, after)
	}
}
