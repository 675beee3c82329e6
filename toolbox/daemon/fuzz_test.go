package daemon

import (
	"bytes"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// FuzzDecodeRequest feeds arbitrary bodies to the JSON request decoder for
// every request type: it must accept or answer 400/413, never panic.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(byte(0), []byte(`{"command":"echo hi","cwd":"/tmp","envs":{"A":"1"},"timeout":3}`))
	f.Add(byte(1), []byte(`{"sessionId":"s"}`))
	f.Add(byte(2), []byte(`{"command":"ls","runAsync":true,"suppressInputEcho":true}`))
	f.Add(byte(3), []byte(`{"data":"x\n"}`))
	f.Add(byte(4), []byte(`{"paths":["a","/b"]}`))
	f.Add(byte(0), []byte(`{"command":`))
	f.Add(byte(2), []byte(`{} {}`))
	f.Add(byte(3), []byte("\x00\xff"))
	f.Add(byte(4), []byte(`{"paths":"`+strings.Repeat("a", 200)+`"}`))
	f.Fuzz(func(t *testing.T, sel byte, body []byte) {
		var v any
		switch sel % 5 {
		case 0:
			v = new(toolbox.ExecuteRequest)
		case 1:
			v = new(toolbox.CreateSessionRequest)
		case 2:
			v = new(toolbox.SessionExecuteRequest)
		case 3:
			v = new(toolbox.SessionSendInputRequest)
		default:
			v = new(toolbox.FilesDownloadRequest)
		}
		const limit = 128
		rec := nopResponseWriter{}
		rc := http.MaxBytesReader(rec, readCloser{bytes.NewReader(body)}, limit)
		err := decodeJSONBody(rc, limit, v)
		if err == nil {
			if len(body) > limit {
				t.Fatalf("accepted %d bytes over the limit", len(body))
			}
			return
		}
		var he *httpError
		if !errors.As(err, &he) || (he.status != 400 && he.status != 413) || he.code != codeInvalidRequestBody {
			t.Fatalf("error %v (%T)", err, err)
		}
	})
}

// FuzzResolvePath checks the path rule: results are absolute and clean,
// NUL bytes are refused, and a relative path is the base's, ".." climbing
// from it (never above "/", the server's root).
func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"a", "../a", "a/../..", "/etc/passwd", "./x/./y", "..", "a\x00b", "//x", ".", "a/b/../../../c"} {
		f.Add(s)
	}
	const base = "/work/dir"
	f.Fuzz(func(t *testing.T, p string) {
		got, err := resolvePath(base, p)
		if err != nil {
			return
		}
		if strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("accepted NUL in %q", p)
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("%q -> %q: not absolute and clean", p, got)
		}
		if !filepath.IsAbs(p) && got != filepath.Join(base, p) {
			t.Fatalf("relative %q resolved to %q, want %q", p, got, filepath.Join(base, p))
		}
	})
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

type nopResponseWriter struct{}

func (nopResponseWriter) Header() http.Header         { return http.Header{} }
func (nopResponseWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopResponseWriter) WriteHeader(int)             {}

// FuzzParseShellState feeds arbitrary shell output to the parsers of the
// state an EXIT trap reports: they must not panic, and what parseExportP
// accepts must be K=V entries.
func FuzzParseShellState(f *testing.F) {
	f.Add([]byte("declare -x A=\"1\"\ndeclare -x B=$'\\n\\001'\ndeclare -x C\n"))
	f.Add([]byte("declare -a arr=([0]=\"a\" [1]=$'b\\nc')\ndeclare -- X=\"1\"\n"))
	f.Add([]byte("export A='x'\n"))
	f.Add([]byte("declare -x A=$'\\x4"))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := parseExportP(b)
		if err == nil {
			for _, kv := range env {
				if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
					t.Fatalf("bad entry %q", kv)
				}
			}
		}
		_ = restoreScript(b, b)
	})
}
