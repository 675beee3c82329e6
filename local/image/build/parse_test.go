package build

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, text string) *Dockerfile {
	t.Helper()
	df, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return df
}

func TestParseEveryInstruction(t *testing.T) {
	df := mustParse(t, `# syntax=docker/dockerfile:1
# a comment
ARG BASE=alpine
FROM ${BASE}:3 AS base
RUN apt-get update && \
    # a comment inside a continuation is dropped
    apt-get install -y curl

RUN ["/bin/echo", "hi there"]
ENV A=1 B="two words"
ENV LEGACY some value
WORKDIR /app
COPY --chown=app:app --chmod=644 a.txt b/ /dest/
ADD ["x.tar", "/opt/"]
USER app:app
ENTRYPOINT ["/entry"]
CMD echo hello
label org.example=yes
EXPOSE 8080/tcp 53/udp
`)
	if df.Syntax != "docker/dockerfile:1" || df.Escape != '\\' {
		t.Errorf("directives: syntax %q escape %q", df.Syntax, df.Escape)
	}
	want := []Instruction{
		{Line: 3, Cmd: "ARG", Args: []string{"BASE=alpine"}},
		{Line: 4, Cmd: "FROM", Args: []string{"${BASE}:3", "AS", "base"}},
		{Line: 5, Cmd: "RUN", Args: []string{"apt-get update &&     apt-get install -y curl"}},
		{Line: 9, Cmd: "RUN", Args: []string{"/bin/echo", "hi there"}, JSON: true},
		{Line: 10, Cmd: "ENV", Args: []string{"A=1", `B="two words"`}},
		{Line: 11, Cmd: "ENV", Args: []string{"LEGACY", "some", "value"}},
		{Line: 12, Cmd: "WORKDIR", Args: []string{"/app"}},
		{Line: 13, Cmd: "COPY", Flags: []string{"--chown=app:app", "--chmod=644"}, Args: []string{"a.txt", "b/", "/dest/"}},
		{Line: 14, Cmd: "ADD", Args: []string{"x.tar", "/opt/"}, JSON: true},
		{Line: 15, Cmd: "USER", Args: []string{"app:app"}},
		{Line: 16, Cmd: "ENTRYPOINT", Args: []string{"/entry"}, JSON: true},
		{Line: 17, Cmd: "CMD", Args: []string{"echo hello"}},
		{Line: 18, Cmd: "LABEL", Args: []string{"org.example=yes"}},
		{Line: 19, Cmd: "EXPOSE", Args: []string{"8080/tcp", "53/udp"}},
	}
	if len(df.Instructions) != len(want) {
		t.Fatalf("got %d instructions, want %d: %+v", len(df.Instructions), len(want), df.Instructions)
	}
	for i, w := range want {
		got := df.Instructions[i]
		got.Text = ""
		if !reflect.DeepEqual(got, w) {
			t.Errorf("instruction %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
	if got := df.Instructions[2].Text; got != "RUN apt-get update &&     apt-get install -y curl" {
		t.Errorf("Text of the continued RUN = %q", got)
	}
}

func TestParseEscapeDirective(t *testing.T) {
	df := mustParse(t, "# escape=`\nFROM scratch\nCOPY a.txt `\n  C:\\dest\\\n")
	if df.Escape != '`' {
		t.Fatalf("Escape = %q, want backtick", df.Escape)
	}
	in := df.Instructions[1]
	if in.Line != 3 || !reflect.DeepEqual(in.Args, []string{"a.txt", `C:\dest\`}) {
		t.Errorf("COPY = line %d %q", in.Line, in.Args)
	}
	// A directive after the first instruction is a comment.
	df = mustParse(t, "FROM scratch\n# escape=`\nRUN a \\\n b\n")
	if df.Escape != '\\' || df.Instructions[1].Args[0] != "a  b" {
		t.Errorf("late directive changed parsing: escape %q, RUN %q", df.Escape, df.Instructions[1].Args)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
		unsupp     bool
	}{
		{"unsupported instruction", "FROM scratch\nRUN true\nHEALTHCHECK CMD true\n", 3, "HEALTHCHECK: unknown or unsupported instruction", true},
		{"unknown word", "FROM scratch\n\n\nFOO bar\n", 4, "FOO: unknown or unsupported instruction", true},
		{"onbuild", "FROM scratch\nONBUILD RUN x\n", 2, "ONBUILD", true},
		{"stage name twice", "FROM a AS one\nRUN x\nFROM b as ONE\n", 3, "a second stage named \"ONE\"", false},
		{"before FROM", "# c\nRUN true\nFROM scratch\n", 2, "comes before any FROM", false},
		{"add --from", "FROM scratch\nADD --from=builder /a /b\n", 2, "unknown flag --from", true},
		{"run --mount", "FROM scratch\nRUN --mount=type=cache,target=/x true\n", 2, "RUN --mount", true},
		{"unknown flag", "FROM scratch\nCOPY --bogus=1 a b\n", 2, "unknown flag --bogus", true},
		{"flag without value", "FROM scratch\nCOPY --chown a b\n", 2, "needs a value", false},
		{"heredoc", "FROM scratch\nRUN <<EOF\necho\nEOF\n", 2, "here-documents", true},
		{"copy one arg", "FROM scratch\nCOPY a\n", 2, "needs SRC... DEST", false},
		{"workdir without folder", "FROM scratch\nWORKDIR   \n", 2, "needs an argument", false},
		{"bad escape", "# escape=x\nFROM scratch\n", 1, "invalid escape character", false},
		{"directive twice", "# escape=`\n# escape=\\\nFROM scratch\n", 2, "given twice", false},
		{"bad from", "FROM a b\n", 1, "IMAGE AS NAME", false},
		{"empty run", "FROM scratch\nRUN\n", 2, "needs a command", false},
		{"bad copy json", "FROM scratch\nCOPY [\"a\", 'b']\n", 2, "invalid JSON array", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Parse error = %v, want a *LineError", err)
			}
			if le.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q (line %d), want line %d and %q", err, le.Line, tc.line, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "Dockerfile line ") {
				t.Errorf("error %q does not start with the line", err)
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupp {
				t.Errorf("errors.Is(%v, ErrUnsupported) = %v, want %v", err, !tc.unsupp, tc.unsupp)
			}
		})
	}
}

func TestParseNoFrom(t *testing.T) {
	for _, text := range []string{"", "# only a comment\n\n", "ARG X=1\n"} {
		_, err := Parse(strings.NewReader(text))
		if err == nil || !strings.Contains(err.Error(), "no FROM") {
			t.Errorf("Parse(%q) = %v, want a no-FROM error", text, err)
		}
	}
}

func TestParseCRLFAndLowerCase(t *testing.T) {
	df := mustParse(t, "from scratch\r\nrun echo \\\r\n  hi\r\n")
	if df.Instructions[0].Cmd != "FROM" || df.Instructions[1].Args[0] != "echo   hi" {
		t.Errorf("instructions %+v", df.Instructions)
	}
}
