package secretproxy

import (
	"net/http"
	"strings"
	"testing"
)

const testValue = "sk-live-0123456789abcdef"

func TestValueReachesAllowedHostInHeader(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	req := newRequest(t, "GET", "https://api.test/v1", nil)
	req.Header.Set("Authorization", "Bearer "+s.Placeholder)
	if code, _ := e.do(e.client(), req); code != 200 {
		t.Fatalf("status %d", code)
	}
	got := e.up.requests()
	if len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+testValue {
		t.Fatalf("upstream got %+v, want the value in Authorization", got)
	}
}

func TestPlaceholderToOtherHostUnchangedWithEvent(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	req := newRequest(t, "GET", "https://other.test/v1", nil)
	req.Header.Set("Authorization", "Bearer "+s.Placeholder)
	e.do(e.client(), req)
	if e.up.contains(testValue) {
		t.Fatal("the value reached a host the secret does not allow")
	}
	if got := e.up.requests(); len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+s.Placeholder {
		t.Fatalf("upstream got %+v, want the placeholder unchanged", got)
	}
	if !e.hasEvent("API_KEY", "does not allow") {
		t.Fatalf("no event for the placeholder: %+v", e.eventList())
	}
	for _, ev := range e.eventList() {
		if strings.Contains(ev.Reason+ev.Host, s.Placeholder) {
			t.Fatal("an event holds the placeholder")
		}
	}
	_ = http.StatusOK
}
