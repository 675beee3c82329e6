package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestSecretSpecFormatsWithoutValue: no fmt verb prints the value of a
// SecretSpec or SecretChange.
func TestSecretSpecFormatsWithoutValue(t *testing.T) {
	v := "sk-cli-unit-value"
	for _, x := range []any{SecretSpec{Name: "K", Value: v}, &SecretSpec{Value: v}, SecretChange{Value: &v}, &SecretChange{Value: &v}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			if s := fmt.Sprintf(verb, x); strings.Contains(s, v) {
				t.Errorf("%s of %T: %s", verb, x, s)
			}
		}
	}
}

// TestSecretFlag: --secret NAME and ENV=NAME fill env → secret name.
func TestSecretFlag(t *testing.T) {
	var f secretFlags
	for _, v := range []string{"API_KEY", "OTHER=team-key"} {
		if err := f.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if want := map[string]string{"API_KEY": "API_KEY", "OTHER": "team-key"}; !maps.Equal(f.refs, want) {
		t.Fatalf("refs %v, want %v", f.refs, want)
	}
}

// TestReadSecretValueTooLong: a value over sandbox.MaxSecretValue on
// standard input is a usage error that does not quote it.
func TestReadSecretValueTooLong(t *testing.T) {
	long := strings.Repeat("v", sandbox.MaxSecretValue+1)
	_, err := readSecretValue(strings.NewReader(long), io.Discard, "K")
	var ue *usageError
	if !errors.As(err, &ue) || strings.Contains(err.Error(), "vvvv") {
		t.Fatalf("too long: %v", err)
	}
	if v, err := readSecretValue(strings.NewReader("abc\r\n"), io.Discard, "K"); err != nil || v != "abc" {
		t.Fatalf("CRLF-ended value: %q, %v", v, err)
	}
}

// TestHelpJSONDocumentsExists: 'agentbox help json' documents the error
// code of a taken secret name.
func TestHelpJSONDocumentsExists(t *testing.T) {
	r := newHarness(t).must("help", "json")
	if !strings.Contains(r.stdout, KindExists+"  ") {
		t.Errorf("help json lacks %q", KindExists)
	}
}
