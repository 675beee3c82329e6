package main

import (
	"bytes"
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"p/a"}
{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"    a_test.go:9: chatter of a passing test\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"p/a","Test":"TestOK"}
{"Action":"run","Package":"p/a","Test":"TestRoot"}
{"Action":"output","Package":"p/a","Test":"TestRoot","Output":"=== RUN   TestRoot\n"}
{"Action":"output","Package":"p/a","Test":"TestRoot","Output":"--- SKIP: TestRoot (0.00s)\n"}
{"Action":"output","Package":"p/a","Test":"TestRoot","Output":"    a_test.go:20: needs root\n"}
{"Action":"skip","Package":"p/a","Test":"TestRoot"}
{"Action":"output","Package":"p/a","Output":"PASS\n"}
{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.1s\n"}
{"Action":"pass","Package":"p/a"}
{"Action":"start","Package":"p/b"}
{"Action":"run","Package":"p/b","Test":"TestBad"}
{"Action":"output","Package":"p/b","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"p/b","Test":"TestBad","Output":"    b_test.go:5: got 1, want 2\n"}
{"Action":"output","Package":"p/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"p/b","Test":"TestBad"}
{"Action":"output","Package":"p/b","Output":"FAIL\tp/b\t0.1s\n"}
{"Action":"fail","Package":"p/b"}
{"Action":"start","Package":"p/c"}
{"Action":"output","Package":"p/c","Output":"?   \tp/c\t[no test files]\n"}
{"Action":"skip","Package":"p/c"}
`

func summarize(t *testing.T, in string) (string, bool) {
	t.Helper()
	var out bytes.Buffer
	s := &summary{out: &out, buffered: map[string][]string{}, started: map[string]bool{}}
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	ok := s.report()
	return out.String(), ok
}

func TestFailureOutputShown(t *testing.T) {
	out, ok := summarize(t, stream)
	if ok {
		t.Error("a failing package reported success")
	}
	for _, want := range []string{"b_test.go:5: got 1, want 2", "--- FAIL: TestBad", "FAIL\tp/b", "ok  \tp/a"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPassingChatterHidden(t *testing.T) {
	out, _ := summarize(t, stream)
	for _, noise := range []string{"chatter of a passing test", "=== RUN", "--- PASS"} {
		if strings.Contains(out, noise) {
			t.Errorf("output shows %q, which go test without -v hides:\n%s", noise, out)
		}
	}
}

func TestSkipsListedWithReason(t *testing.T) {
	out, _ := summarize(t, stream)
	if !strings.Contains(out, "skipped tests: 1\n  p/a.TestRoot: a_test.go:20: needs root\n") {
		t.Errorf("skip not listed with its reason:\n%s", out)
	}
	if !strings.Contains(out, "packages: 1 passed, 1 failed, 1 without tests") {
		t.Errorf("package counts wrong:\n%s", out)
	}
}

func TestCrashedPackageFails(t *testing.T) {
	out, ok := summarize(t, `{"Action":"start","Package":"p/x"}
{"Action":"run","Package":"p/x","Test":"TestHang"}
`)
	if ok || !strings.Contains(out, "no result for package p/x") {
		t.Errorf("a package without a result passed (ok %v):\n%s", ok, out)
	}
}

func TestBuildFailureFails(t *testing.T) {
	out, ok := summarize(t, `{"ImportPath":"p/y","Action":"build-output","Output":"y.go:3:1: syntax error\n"}
{"ImportPath":"p/y","Action":"build-fail"}
`)
	if ok || !strings.Contains(out, "y.go:3:1: syntax error") {
		t.Errorf("a build failure passed (ok %v):\n%s", ok, out)
	}
}

func TestAllPassing(t *testing.T) {
	out, ok := summarize(t, `{"Action":"start","Package":"p/a"}
{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.1s\n"}
{"Action":"pass","Package":"p/a"}
`)
	if !ok || !strings.Contains(out, "skipped tests: 0") {
		t.Errorf("all passing reported a failure (ok %v):\n%s", ok, out)
	}
}
