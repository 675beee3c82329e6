package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// netFake is the fake engine whose sandboxes' egress proxies refused
// what refusals lists.
type netFake struct {
	*fakeEngine
	refusals []sandbox.NetworkRefusal
}

func (f *netFake) networkInfo(ctx context.Context, id string) (*sandbox.NetworkInfo, error) {
	n, err := f.fakeEngine.networkInfo(ctx, id)
	if err != nil {
		return nil, err
	}
	n.RefusedConnections = uint64(len(f.refusals))
	n.PolicyLog = f.refusals
	return n, nil
}

// networkOf gets sandbox id's network view with key.
func networkOf(t *testing.T, c *dashClient, key, id string) (int, networkView, string) {
	t.Helper()
	resp, data := c.do("GET", "/api/sandbox/"+id+"/network", nil, "Authorization", "Bearer "+key)
	var v networkView
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("network %s: %v", data, err)
		}
	}
	return resp.StatusCode, v, string(data)
}

// The network view: the policy in Daytona's fields, and the engine's
// view (mode, counters, policy log) while the sandbox runs; null once
// stopped; another organization's sandbox is not found.
func TestNetworkView(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	eng := &netFake{fakeEngine: newFakeEngine(t), refusals: []sandbox.NetworkRefusal{
		{Time: at, Protocol: "connect", Host: "192.0.2.7", Port: 443, Reason: "not in the domain allow list"},
	}}
	_, c, keyA, keyB := metricsServer(t, eng, time.Hour)
	id := createFake(t, c, keyA, map[string]any{"domainAllowList": "example.com"})
	st, v, body := networkOf(t, c, keyA, id)
	if st != http.StatusOK || v.NetworkBlockAll || v.NetworkAllowList != "" || v.DomainAllowList != "example.com" {
		t.Fatalf("network: %d %s", st, body)
	}
	if v.Info == nil || v.Info.Mode != sandbox.NetworkDomainAllowList || v.Info.RefusedConnections != 1 || len(v.Info.PolicyLog) != 1 {
		t.Fatalf("network info %s, want the engine's mode and policy log", body)
	}
	if e := v.Info.PolicyLog[0]; !e.Time.Equal(at) || e.Host != "192.0.2.7" || e.Port != 443 || e.Protocol != "connect" || e.Reason == "" {
		t.Errorf("policy log entry %+v", e)
	}
	// The names the dashboard's network tab (sandbox.js) reads.
	for _, name := range []string{`"networkBlockAll":false`, `"domainAllowList":"example.com"`, `"info":{`, `"mode":`, `"refusedConnections":1`, `"policyLog":[`, `"host":`, `"port":`, `"protocol":`, `"reason":`} {
		if !strings.Contains(body, name) {
			t.Errorf("network %s has no %s", body, name)
		}
	}
	// A policy changed live shows at once.
	auth := []string{"Authorization", "Bearer " + keyA}
	if resp, data := c.do("POST", "/api/sandbox/"+id+"/network-settings", map[string]any{"networkBlockAll": true, "domainAllowList": ""}, auth...); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		t.Fatalf("network-settings: %d %s", resp.StatusCode, data)
	}
	if _, v, body := networkOf(t, c, keyA, id); !v.NetworkBlockAll || v.Info == nil || v.Info.Mode != sandbox.NetworkBlocked {
		t.Errorf("after blocking all: %s", body)
	}
	if st, _, body := networkOf(t, c, keyB, id); st != http.StatusNotFound {
		t.Errorf("another organization's key: %d %s, want 404", st, body)
	}
	if resp, _ := c.do("GET", "/api/sandbox/"+id+"/network", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", resp.StatusCode)
	}
	if resp, data := c.do("POST", "/api/sandbox/"+id+"/stop", nil, auth...); resp.StatusCode != http.StatusOK {
		t.Fatalf("stop: %d %s", resp.StatusCode, data)
	}
	waitFakeState(t, c, id, stateStopped, auth)
	if st, v, body := networkOf(t, c, keyA, id); st != http.StatusOK || v.Info != nil || !strings.Contains(body, `"info":null`) || !v.NetworkBlockAll {
		t.Errorf("a stopped sandbox's network: %d %s, want its policy and info null", st, body)
	}
}
