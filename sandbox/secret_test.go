package sandbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

const secretValue = "sk-live-0123456789abcdef"

func TestSecretNeverFormatsItsValue(t *testing.T) {
	s := sandbox.Secret{Name: "KEY", Value: secretValue, Hosts: []string{"api.example.com"}}
	var logs strings.Builder
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "secret", s)
	b, _ := json.Marshal(s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), fmt.Sprintf("%s", s), fmt.Sprint(&s), fmt.Sprint([]sandbox.Secret{s}), logs.String(), string(b)} {
		if strings.Contains(out, secretValue) {
			t.Errorf("value printed: %s", out)
		}
		if !strings.Contains(out, "KEY") {
			t.Errorf("name missing: %s", out)
		}
	}
}

func TestSecretValidateRefusesBadInput(t *testing.T) {
	ok := sandbox.Secret{Name: "KEY", Value: "v", Hosts: []string{"api.example.com"}}
	cases := map[string]func(*sandbox.Secret){
		"name with a dash":     func(s *sandbox.Secret) { s.Name = "MY-KEY" },
		"name starting digit":  func(s *sandbox.Secret) { s.Name = "1KEY" },
		"empty name":           func(s *sandbox.Secret) { s.Name = "" },
		"empty value":          func(s *sandbox.Secret) { s.Value = "" },
		"value over 64 KiB":    func(s *sandbox.Secret) { s.Value = strings.Repeat("v", sandbox.MaxSecretValue+1) },
		"value with a newline": func(s *sandbox.Secret) { s.Value = "a\nb" },
		"no hosts":             func(s *sandbox.Secret) { s.Hosts = nil },
		"URL host":             func(s *sandbox.Secret) { s.Hosts = []string{"https://api.example.com"} },
		"host with port":       func(s *sandbox.Secret) { s.Hosts = []string{"api.example.com:443"} },
		"IP host":              func(s *sandbox.Secret) { s.Hosts = []string{"10.0.0.1"} },
		"bare star":            func(s *sandbox.Secret) { s.Hosts = []string{"*"} },
		"inner star":           func(s *sandbox.Secret) { s.Hosts = []string{"a.*.com"} },
	}
	for name, mutate := range cases {
		s := ok
		s.Value = secretValue
		mutate(&s)
		err := s.Validate()
		if !errors.Is(err, sandbox.ErrInvalidSecret) || !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidSecret and ErrInvalidArgument", name, err)
			continue
		}
		if s.Value != "" && len(s.Value) > 4 && strings.Contains(err.Error(), s.Value) {
			t.Errorf("%s: the error holds the value", name)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid secret: %v", err)
	}
	if err := (sandbox.Secret{Name: "K", Value: strings.Repeat("v", sandbox.MaxSecretValue), Hosts: []string{"a.example"}}).Validate(); err != nil {
		t.Fatalf("64 KiB value: %v", err)
	}
}

func TestSecretCanonicalHosts(t *testing.T) {
	s, err := sandbox.Secret{Name: "K", Value: "v", Hosts: []string{"API.Example.com.", "api.example.com", " *.Example.org "}}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Hosts, ","); got != "api.example.com,*.example.org" {
		t.Fatalf("hosts = %s", got)
	}
}

func TestSecretAllows(t *testing.T) {
	s := sandbox.Secret{Name: "K", Value: "v", Hosts: []string{"api.example.com", "*.example.org"}}
	for host, want := range map[string]bool{
		"api.example.com": true, "API.EXAMPLE.COM.": true, "x.api.example.com": false, "example.com": false,
		"a.example.org": true, "a.b.example.org": true, "example.org": false, "evil-example.org": false,
		"10.0.0.1": false, "": false,
	} {
		if got := s.Allows(host); got != want {
			t.Errorf("Allows(%q) = %t, want %t", host, got, want)
		}
	}
}

func TestCanonicalSecretsRefusesDuplicateNames(t *testing.T) {
	_, err := sandbox.CanonicalSecrets([]sandbox.Secret{
		{Name: "K", Value: "a", Hosts: []string{"a.example"}},
		{Name: "K", Value: "b", Hosts: []string{"b.example"}},
	})
	if !errors.Is(err, sandbox.ErrInvalidSecret) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate names: %v", err)
	}
	if got, err := sandbox.CanonicalSecrets(nil); got != nil || err != nil {
		t.Fatalf("none: %v %v", got, err)
	}
}
