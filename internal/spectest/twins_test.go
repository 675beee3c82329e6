package spectest

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTwinPathsBothRouted: api.json's GET /sandbox/{sandboxId}/secrets
// and PUT /sandbox/{sandboxIdOrName}/secrets, paths that differ only in
// a parameter's name, are both found, each checked against its own
// operation (the PUT's required body).
func TestTwinPathsBothRouted(t *testing.T) {
	v := LoadControlPlane(t)
	if err := v.ValidateRequest(httptest.NewRequest("GET", "/sandbox/sb-1/secrets", nil)); err != nil {
		t.Errorf("GET: %v", err)
	}
	put := httptest.NewRequest("PUT", "/sandbox/sb-1/secrets", strings.NewReader(`{"secrets":[{"K":"k"}]}`))
	put.Header.Set("Content-Type", "application/json")
	if err := v.ValidateRequest(put); err != nil {
		t.Errorf("PUT: %v", err)
	}
	bad := httptest.NewRequest("PUT", "/sandbox/sb-1/secrets", strings.NewReader(`{}`))
	bad.Header.Set("Content-Type", "application/json")
	if err := v.ValidateRequest(bad); err == nil {
		t.Error("a PUT without its required secrets passed")
	}
}
