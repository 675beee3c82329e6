package redact

import (
	"fmt"
	"testing"
)

func TestSecrets(t *testing.T) {
	if got := Secrets("token s3cr3t in s3cr3t", "", "s3cr3t"); got != "token REDACTED in REDACTED" {
		t.Errorf("Secrets = %q", got)
	}
	if got := string(SecretsBytes([]byte(`{"auth":"tok"}`), "tok")); got != `{"auth":"REDACTED"}` {
		t.Errorf("SecretsBytes = %q", got)
	}
	b := []byte("clean")
	if got := SecretsBytes(b, "tok"); &got[0] != &b[0] {
		t.Error("SecretsBytes copied a slice with no secret in it")
	}
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		`Get "https://ann:pw@example.com/r.git/info/refs": EOF`: `Get "https://REDACTED@example.com/r.git/info/refs": EOF`,
		"http://u@h/x and ssh://git:p@w@host:22/y":              "http://REDACTED@h/x and ssh://REDACTED@host:22/y",
		"no url here":                 "no url here",
		"https://host/path@x":         "https://host/path@x",
		"tail https://user:pass@host": "tail https://REDACTED@host",
		"secret pw in https://a:pw@h": "secret REDACTED in https://REDACTED@h",
	} {
		if got := Text(in, "pw"); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.com/r.git":                 "https://example.com/r.git",
		"https://tok-Secret-1@example.com/r.git":    "https://REDACTED@example.com/r.git",
		"https://ann:pw-Secret-2@example.com/r.git": "https://REDACTED@example.com/r.git",
		"https://ann:pw Secret-3@exa mple.com/r%zz": "https://REDACTED@exa mple.com/r%zz",
		"not a url":                     "not a url",
		"s3://key:secret@bucket/prefix": "s3://REDACTED@bucket/prefix",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func ExampleText() {
	fmt.Println(Text(`clone "https://ann:tok@example.com/r.git": 401`))
	// Output: clone "https://REDACTED@example.com/r.git": 401
}
