// Command testsummary reads the JSON event stream of `go test -json` on
// its standard input and prints what a plain `go test` would (each
// package's result line, and the output of failing tests), then a summary
// that lists every skipped test with its reason, so that a CI log shows
// what did not run. It exits with 1 when a test or a build failed, or when
// the stream ends without a result for some package.
//
//	go test -json ./... | go run ./internal/cmd/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (see cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
}

// skip is a skipped test and why.
type skip struct {
	name   string
	reason string
}

// summary accumulates the stream.
type summary struct {
	out      io.Writer
	buffered map[string][]string // test output kept until the test ends
	skips    []skip
	passed   int
	failed   int
	noTests  int
	started  map[string]bool // packages without a result yet
	broken   bool            // a build failed
}

func main() {
	s := &summary{out: os.Stdout, buffered: map[string][]string{}, started: map[string]bool{}}
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if !s.report() {
		os.Exit(1)
	}
}

// read consumes the event stream. A line that is not an event (a message
// of the go command itself) is printed as it is.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(s.out, string(line))
			continue
		}
		s.handle(e)
	}
	return sc.Err()
}

func (s *summary) handle(e event) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(s.out, e.Output)
	case e.Action == "build-fail":
		s.broken = true
	case e.Action == "start":
		s.started[e.Package] = true
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		delete(s.started, e.Package)
		switch e.Action {
		case "fail":
			s.failed++
		case "pass":
			s.passed++
		default:
			s.noTests++
		}
	case e.Action == "output" && e.Test == "":
		if !noise(e.Output) {
			fmt.Fprint(s.out, e.Output)
		}
	case e.Action == "output":
		if !noise(e.Output) {
			s.buffered[key] = append(s.buffered[key], e.Output)
		}
	case e.Action == "fail":
		fmt.Fprint(s.out, strings.Join(s.buffered[key], ""))
		delete(s.buffered, key)
	case e.Action == "skip":
		s.skips = append(s.skips, skip{name: e.Package + "." + e.Test, reason: skipReason(s.buffered[key])})
		delete(s.buffered, key)
	case e.Action == "pass":
		delete(s.buffered, key)
	}
}

// noise reports whether a line is one that `go test` without -v would not
// print.
func noise(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "PASS\n"} {
		if strings.HasPrefix(line, p) || strings.HasPrefix(strings.TrimLeft(line, " "), p) {
			return true
		}
	}
	return false
}

// skipReason extracts the message of a skipped test from its output: the
// lines after "--- SKIP", else whatever it logged.
func skipReason(lines []string) string {
	var reason []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		reason = append(reason, t)
	}
	if len(reason) == 0 {
		return "(no reason given)"
	}
	return strings.Join(reason, " / ")
}

// report prints the summary and reports whether everything passed.
func (s *summary) report() bool {
	fmt.Fprintf(s.out, "\npackages: %d passed, %d failed, %d without tests\n", s.passed, s.failed, s.noTests)
	sort.Slice(s.skips, func(i, j int) bool { return s.skips[i].name < s.skips[j].name })
	fmt.Fprintf(s.out, "skipped tests: %d\n", len(s.skips))
	for _, k := range s.skips {
		fmt.Fprintf(s.out, "  %s: %s\n", k.name, k.reason)
	}
	var unfinished []string
	for p := range s.started {
		unfinished = append(unfinished, p)
	}
	sort.Strings(unfinished)
	for _, p := range unfinished {
		fmt.Fprintf(s.out, "no result for package %s (the test binary crashed or was killed)\n", p)
	}
	return s.failed == 0 && !s.broken && len(unfinished) == 0
}
