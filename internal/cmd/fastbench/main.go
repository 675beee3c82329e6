// Command fastbench measures the figures of the local engine's fast path
// (issue 29's table), each interleaved with its baseline in one run:
// operation and baseline alternate for -rounds rounds, and the table gives
// their medians and the ratio. It uses only public APIs (local.New,
// local.Options, local.Config, local.Pool, ExecuteCommand with streaming
// writers) and the agentbox CLI binary of -cli, so that the same source
// builds against an older tree: scripts/bench-fastpath.sh runs it for
// several revisions, as root and as an ordinary user, in one sitting.
//
// Usage:
//
//	fastbench [-rows create,pool,cli,pss,concurrent,stream,ls,exec] [-rounds N]
//	          [-state-dir DIR] [-cli PATH] [-json FILE] [-label TEXT]
//	fastbench -merge LABEL=FILE.json ...
//
// It prints a markdown table (figure, op median, baseline median, ratio,
// goal, met?) and, with -json, writes the raw results (every sample, what
// was counted) to FILE ("-": standard output, after the table).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentbox-dev/agentbox/local"
)

// allRows are the rows of the table, in its order.
var allRows = []string{"create", "pool", "cli", "pss", "concurrent", "stream", "ls", "exec"}

// config is the command line.
type config struct {
	rows      []string
	rounds    int
	stateDir  string
	cli       string
	jsonOut   string
	label     string
	pssN      int
	lsN       int
	clients   int
	streamMiB int
	fallback  bool
	child     string // internal: the role of a re-executed child
	sandboxID string // internal: the child's sandbox
	merge     bool
	args      []string
}

func main() {
	local.Init()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// parseFlags returns the configuration of args.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("fastbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rows := fs.String("rows", strings.Join(allRows, ","), "comma-separated rows to measure: "+strings.Join(allRows, ", "))
	fs.IntVar(&c.rounds, "rounds", 10, "rounds of each row (operation and baseline alternate)")
	fs.StringVar(&c.stateDir, "state-dir", "", "folder under which the rows' state dirs are made (default: a new temporary folder)")
	fs.StringVar(&c.cli, "cli", "", "path of the agentbox CLI binary (rows cli and ls)")
	fs.StringVar(&c.jsonOut, "json", "", "write the raw results as JSON to this file (- for standard output)")
	fs.StringVar(&c.label, "label", "", "label of this run in the JSON (e.g. REV root)")
	fs.IntVar(&c.pssN, "pss-n", 20, "sandboxes of the pss row")
	fs.IntVar(&c.lsN, "ls-n", 200, "stopped sandboxes of the ls row")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients of the concurrent row")
	fs.IntVar(&c.streamMiB, "stream-mib", 256, "MiB streamed by the stream row")
	fs.BoolVar(&c.fallback, "fallback-network", true, "where the default network cannot start (without root on older trees), run the rows that need only a running sandbox with the blocked network, and say so")
	fs.BoolVar(&c.merge, "merge", false, "print one table of the JSON files given as LABEL=FILE arguments, side by side")
	fs.StringVar(&c.child, "child", "", "internal: run as the stream row's child (sandbox or pipe)")
	fs.StringVar(&c.sandboxID, "sandbox-id", "", "internal: the sandbox of a -child sandbox")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.args = fs.Args()
	for _, r := range strings.Split(*rows, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if !knownRow(r) {
			return c, fmt.Errorf("-rows: unknown row %q: use some of %s", r, strings.Join(allRows, ","))
		}
		c.rows = append(c.rows, r)
	}
	switch {
	case c.rounds < 1:
		return c, fmt.Errorf("-rounds %d: use 1 or more", c.rounds)
	case c.pssN < 1 || c.lsN < 1 || c.clients < 1 || c.streamMiB < 1:
		return c, fmt.Errorf("-pss-n, -ls-n, -clients and -stream-mib must be 1 or more")
	case !c.merge && len(c.args) > 0:
		return c, fmt.Errorf("unexpected arguments %q (only -merge takes arguments)", c.args)
	}
	return c, nil
}

// knownRow reports whether r names a row.
func knownRow(r string) bool {
	for _, a := range allRows {
		if a == r {
			return true
		}
	}
	return false
}

// run is main without the exit.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintln(stderr, "fastbench:", err)
		}
		return 2
	}
	if c.merge {
		return runMerge(c.args, stdout, stderr)
	}
	if c.child != "" {
		return runChild(c, stdout, stderr)
	}
	rs := measure(c, stderr)
	fmt.Fprint(stdout, table(rs))
	if c.jsonOut != "" {
		if err := writeJSON(c, rs, stdout); err != nil {
			fmt.Fprintln(stderr, "fastbench:", err)
			return 1
		}
	}
	return 0
}

// A Run is the JSON of one run.
type Run struct {
	Label   string   `json:"label"`
	EUID    int      `json:"euid"`
	Rounds  int      `json:"rounds"`
	Results []Result `json:"results"`
}

// writeJSON writes rs as a Run to c.jsonOut.
func writeJSON(c config, rs []Result, stdout io.Writer) error {
	b, err := json.MarshalIndent(Run{Label: c.label, EUID: os.Geteuid(), Rounds: c.rounds, Results: rs}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if c.jsonOut == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(c.jsonOut, b, 0o644)
}

// runMerge prints the merged table of the LABEL=FILE arguments.
func runMerge(args []string, stdout, stderr io.Writer) int {
	var cols []Column
	for _, a := range args {
		label, file, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(stderr, "fastbench: -merge argument %q: use LABEL=FILE.json\n", a)
			return 2
		}
		b, err := os.ReadFile(file)
		var r Run
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			fmt.Fprintf(stderr, "fastbench: -merge %s: %v\n", file, err)
			return 1
		}
		cols = addColumn(cols, label, r.Results)
	}
	fmt.Fprint(stdout, mergedTable(cols))
	return 0
}

// addColumn appends rs to the column label, made if new: a label given
// several times (one file per row) is one column.
func addColumn(cols []Column, label string, rs []Result) []Column {
	for i := range cols {
		if cols[i].Label == label {
			cols[i].Results = append(cols[i].Results, rs...)
			return cols
		}
	}
	return append(cols, Column{Label: label, Results: rs})
}
