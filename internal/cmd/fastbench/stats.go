package main

import (
	"fmt"
	"slices"
	"strings"
)

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio returns op/base, 0 when base is not positive.
func ratio(op, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return op / base
}

// A Goal is what a figure must reach: its ratio (Of "ratio") or its
// operation's median (Of "op") at most (Cmp "<=") or at least (">=") Limit.
type Goal struct {
	Of    string  `json:"of"`
	Cmp   string  `json:"cmp"`
	Limit float64 `json:"limit"`
	// Text is the goal as the issue words it.
	Text string `json:"text"`
}

// met reports whether r reaches g; ok is false when there is no goal or
// no figure to judge.
func (g Goal) met(r Result) (met, ok bool) {
	if g.Cmp == "" || r.Error != "" {
		return false, false
	}
	v := r.Op
	if g.Of == "ratio" {
		if r.Ratio == 0 {
			return false, false
		}
		v = r.Ratio
	}
	if g.Cmp == ">=" {
		return v >= g.Limit, true
	}
	return v <= g.Limit, true
}

// A Result is one line of the table: a figure measured against its
// baseline in the same run.
type Result struct {
	Row    string `json:"row"`    // the -rows name that produced it
	Figure string `json:"figure"` // what was measured
	Unit   string `json:"unit"`   // of Op and Base
	// Op and Base are the medians of OpSamples and BaseSamples; Ratio is
	// Op/Base (0 without a baseline).
	Op          float64   `json:"op"`
	Base        float64   `json:"base,omitempty"`
	Ratio       float64   `json:"ratio,omitempty"`
	OpSamples   []float64 `json:"opSamples,omitempty"`
	BaseSamples []float64 `json:"baseSamples,omitempty"`
	Baseline    string    `json:"baseline,omitempty"` // what Base measured
	Goal        Goal      `json:"goal"`
	Met         *bool     `json:"met,omitempty"`
	Note        string    `json:"note,omitempty"`  // how it was measured, what was counted
	Error       string    `json:"error,omitempty"` // why it could not be measured
	// Extra holds details (the processes counted for PSS, CPU sources).
	Extra map[string]any `json:"extra,omitempty"`
}

// finish fills Op, Base, Ratio and Met from the samples.
func (r *Result) finish() {
	if len(r.OpSamples) > 0 {
		r.Op = median(r.OpSamples)
	}
	if len(r.BaseSamples) > 0 {
		r.Base = median(r.BaseSamples)
		r.Ratio = ratio(r.Op, r.Base)
	}
	if m, ok := r.Goal.met(*r); ok {
		r.Met = &m
	}
}

// failed returns a Result of row that could not be measured.
func failed(row, figure string, g Goal, err error) Result {
	return Result{Row: row, Figure: figure, Goal: g, Error: firstLine(err.Error(), 160)}
}

// firstLine returns the first line of s, cut to at most n bytes.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// num formats v with three significant digits.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// metText is the table's "met?" cell.
func metText(r Result) string {
	switch {
	case r.Error != "":
		return "n/a"
	case r.Met == nil:
		return "—"
	case *r.Met:
		return "yes"
	default:
		return "no"
	}
}

// cell is r's figure in one cell: the ratio and both medians, or the
// median alone, or the error.
func cell(r Result) string {
	if r.Error != "" {
		return errText(r.Error)
	}
	if r.Ratio == 0 {
		return fmt.Sprintf("%s %s", num(r.Op), r.Unit)
	}
	return fmt.Sprintf("**%s×** (%s / %s %s)", num(r.Ratio), num(r.Op), num(r.Base), r.Unit)
}

// errText is the cell of a figure that could not be measured: the error,
// or a reason that starts with "n/a" as it is.
func errText(e string) string {
	if strings.HasPrefix(e, "n/a") {
		return escape(e)
	}
	return "error: " + escape(e)
}

// escape keeps a cell's text from breaking a markdown table.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// table formats results as a markdown table: row, op median, baseline
// median, ratio, goal, met?
func table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| figure | op (median) | baseline (median) | ratio | goal | met? |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rs {
		op, base, rt := "—", "—", "—"
		if r.Error != "" {
			op = errText(r.Error)
		} else {
			op = num(r.Op) + " " + r.Unit
			if r.Baseline != "" {
				base = num(r.Base) + " " + r.Unit + " (" + escape(r.Baseline) + ")"
			}
			if r.Ratio != 0 {
				rt = num(r.Ratio) + "×"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", escape(r.Figure), op, base, rt, escape(r.Goal.Text), metText(r))
	}
	b.WriteString(notes([]Column{{Results: rs}}))
	return b.String()
}

// A Column is one run's results (one rev in one mode) for mergedTable.
type Column struct {
	Label   string
	Results []Result
}

// mergedTable formats several runs side by side: one line per figure (in
// the order first seen), one column per run.
func mergedTable(cols []Column) string {
	var figures []string
	goals := map[string]string{}
	cells := make([]map[string]Result, len(cols))
	for i, c := range cols {
		cells[i] = map[string]Result{}
		for _, r := range c.Results {
			if _, seen := goals[r.Figure]; !seen {
				figures = append(figures, r.Figure)
				goals[r.Figure] = r.Goal.Text
			}
			cells[i][r.Figure] = r
		}
	}
	var b strings.Builder
	b.WriteString("| figure | goal |")
	for _, c := range cols {
		b.WriteString(" " + escape(c.Label) + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, f := range figures {
		fmt.Fprintf(&b, "| %s | %s |", escape(f), escape(goals[f]))
		for i := range cols {
			r, ok := cells[i][f]
			switch {
			case !ok:
				b.WriteString(" not run |")
			case r.Met != nil && !*r.Met:
				b.WriteString(" " + cell(r) + " (not met) |")
			default:
				b.WriteString(" " + cell(r) + " |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(notes(cols))
	return b.String()
}

// notes lists the distinct notes of the figures of cols, each with the
// labels of the columns it was seen in.
func notes(cols []Column) string {
	type key struct{ figure, note string }
	var order []key
	labels := map[key][]string{}
	for _, c := range cols {
		for _, r := range c.Results {
			if r.Note == "" {
				continue
			}
			k := key{r.Figure, r.Note}
			if _, seen := labels[k]; !seen {
				order = append(order, k)
			}
			if c.Label != "" && !slices.Contains(labels[k], c.Label) {
				labels[k] = append(labels[k], c.Label)
			}
		}
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nNotes:\n")
	for _, k := range order {
		where := ""
		if l := labels[k]; len(l) > 0 && len(l) < len(cols) {
			where = " [" + strings.Join(l, "; ") + "]"
		}
		fmt.Fprintf(&b, "- %s%s: %s\n", k.figure, where, k.note)
	}
	return b.String()
}
