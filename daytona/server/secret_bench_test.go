package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkSecretCreateSandbox measures serve's answer to a create
// (POST /sandbox until its answer, the record on disk; the engine's
// creation held, so that only the API's work counts) without secrets
// (the baseline) and with 4 secrets, which the create resolves (their
// sealed values opened) and records by name.
func BenchmarkSecretCreateSandbox(b *testing.B) {
	for _, n := range []int{0, 4} {
		name := "none"
		if n > 0 {
			name = fmt.Sprintf("%d-secrets", n)
		}
		b.Run(name, func(b *testing.B) { benchCreateWithSecrets(b, n) })
	}
}

// benchCreateWithSecrets is BenchmarkSecretCreateSandbox with n secrets,
// on a server of its own.
func benchCreateWithSecrets(b *testing.B, n int) {
	eng := newFakeEngine(b)
	defer eng.block("create")()
	s, err := newServer(Options{StateDir: b.TempDir(), MaxSandboxesPerOrg: -1}, eng, time.Hour, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	}()
	body := map[string]any{}
	if n > 0 {
		var refs []map[string]string
		for i := range n {
			name := fmt.Sprintf("KEY_%d", i)
			benchAPI(b, srv.Client(), srv.URL, "POST", "/secret", map[string]any{"name": name, "value": testSecretValue, "hosts": []string{"api.example.com"}}, nil, http.StatusCreated)
			refs = append(refs, map[string]string{name: name})
		}
		body["secrets"] = refs
	}
	for b.Loop() {
		benchAPI(b, srv.Client(), srv.URL, "POST", "/sandbox", body, nil, http.StatusOK)
	}
}

// BenchmarkSecretResolve measures what the secrets add to a create or a
// start: resolving 4 secrets (their sealed values opened) for the
// engine, beside the baseline of resolving none.
func BenchmarkSecretResolve(b *testing.B) {
	s, err := newServer(Options{StateDir: b.TempDir()}, newFakeEngine(b), time.Hour, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	var refs []secretRef
	for i := range 4 {
		name := fmt.Sprintf("KEY_%d", i)
		sr := &secretRecord{id: newID(), org: s.org, name: name, hosts: []string{"api.example.com"}}
		sr.sealed = s.secrets.box.Seal([]byte(testSecretValue), sealContext(sr.id))
		if err := s.secrets.add(sr); err != nil {
			b.Fatal(err)
		}
		refs = append(refs, secretRef{Env: name, Name: name})
	}
	for _, c := range []struct {
		name string
		refs []secretRef
	}{{"none", nil}, {"4-secrets", refs}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.secrets.resolve(s.org, c.refs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
