package sandbox

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestShellQuoteMastraRules(t *testing.T) {
	cases := map[string]string{
		"hello":       "hello",
		"hello world": "'hello world'",
		"it's":        `'it'\''s'`,
		"/srv/app":    "/srv/app",
		"":            "''",
		"a=b:c@d.e-f": "a=b:c@d.e-f",
		"$HOME":       "'$HOME'",
		"a\nb":        "'a\nb'",
		"héllo":       "'héllo'",
		"*":           "'*'",
		"a'b'c":       `'a'\''b'\''c'`,
		// Characters just outside the plain set are quoted.
		"a+b": "'a+b'", "a,b": "'a,b'", "~": "'~'", "50%": "'50%'", "#x": "'#x'",
		"a b": "'a b'", "a\tb": "'a\tb'", "x!": "'x!'", "[a]": "'[a]'",
	}
	for in, want := range cases {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestShellQuoteRoundTrip runs quoted args through a real shell and checks
// that each comes back unchanged.
func TestShellQuoteRoundTrip(t *testing.T) {
	args := []string{"plain", "two words", "it's", `"double"`, "$HOME", "`id`", "back\\slash",
		"new\nline", "tab\there", "ünïcødé ✓", "", "--flag=1", "semi;colon", "glob*?", "!bang"}
	line := CommandLine("printf '%s\\0'", args)
	out, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	got := strings.Split(string(out), "\x00")
	got = got[:len(got)-1]
	if len(got) != len(args) {
		t.Fatalf("got %d args %q, want %d", len(got), got, len(args))
	}
	for i := range args {
		if got[i] != args[i] {
			t.Errorf("arg %d: got %q, want %q", i, got[i], args[i])
		}
	}
}

func TestCommandLine(t *testing.T) {
	if got := CommandLine("echo hi | wc -c", nil); got != "echo hi | wc -c" {
		t.Errorf("command without args changed: %q", got)
	}
	if got := CommandLine("ls", []string{"-la", "my dir"}); got != "ls -la 'my dir'" {
		t.Errorf("got %q", got)
	}
}

func TestValidateEnv(t *testing.T) {
	for _, ok := range []string{"A", "_x", "PATH", "a1_B2"} {
		if !ValidEnvName(ok) {
			t.Errorf("ValidEnvName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "1A", "A-B", "A B", "A=B", "$(id)", "é"} {
		if ValidEnvName(bad) {
			t.Errorf("ValidEnvName(%q) = true", bad)
		}
	}
	err := ValidateEnv(map[string]string{"GOOD": "1", "BAD NAME": "secret-value"})
	if !errors.Is(err, ErrInvalidEnv) {
		t.Fatalf("err = %v, want ErrInvalidEnv", err)
	}
	if !strings.Contains(err.Error(), `"BAD NAME"`) || strings.Contains(err.Error(), "secret-value") {
		t.Errorf("error should name the variable but not its value: %v", err)
	}
	if err := ValidateEnv(nil); err != nil {
		t.Errorf("nil env: %v", err)
	}
}
