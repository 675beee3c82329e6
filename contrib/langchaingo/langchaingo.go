// Package langchaingo gives agentbox's tools (package tools) to agents of
// github.com/tmc/langchaingo: each tool is a langchaingo tools.Tool, and
// Definition gives the function-calling form (llms.Tool) with its JSON
// schema.
//
// It is a module of its own, so that the agentbox module does not depend
// on langchaingo.
package langchaingo

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/tmc/langchaingo/llms"
	lctools "github.com/tmc/langchaingo/tools"

	"github.com/agentbox-dev/agentbox/tools"
)

// Tool is one agentbox tool as a langchaingo tool.
type Tool struct {
	tool *tools.Tool
	opts *tools.CallOptions
	// single is the one required string property, which a plain-text
	// input fills ("" when the tool has none).
	single string
}

var _ lctools.Tool = (*Tool)(nil)

// Tools returns the tools of set as langchaingo tools; opts (nil is
// valid) configures every call, e.g. with an approval gate.
func Tools(set *tools.Set, opts *tools.CallOptions) []lctools.Tool {
	var out []lctools.Tool
	for _, t := range set.Tools() {
		out = append(out, New(t, opts))
	}
	return out
}

// New returns t as a langchaingo tool.
func New(t *tools.Tool, opts *tools.CallOptions) *Tool {
	return &Tool{tool: t, opts: opts, single: singleString(t.InputSchema)}
}

// singleString returns the tool's one required property when it is a
// string, else "".
func singleString(schema json.RawMessage) string {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Required) != 1 || s.Properties[s.Required[0]].Type != "string" {
		return ""
	}
	return s.Required[0]
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.tool.Name }

// Description describes the tool and its input, for a prompt.
func (t *Tool) Description() string {
	d := t.tool.Description() + "\nInput: a JSON object matching the schema " + string(compact(t.tool.InputSchema))
	if t.single != "" {
		d += ", or plain text for " + t.single
	}
	return d + "."
}

func compact(b json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// Call runs the tool with input: a JSON object of its arguments, or plain
// text for a tool with one required string argument (execute_command's
// command, read_file's path…). Failures, bad input and refusals included,
// come back as text starting with "Error:" and a nil error, because a
// langchaingo executor stops at a tool's error: the model reads them and
// goes on. The error is non-nil only when ctx ended.
func (t *Tool) Call(ctx context.Context, input string) (string, error) {
	args := argsOf(input, t.single)
	r := t.tool.Call(ctx, args, t.opts)
	if err := ctx.Err(); err != nil && r.IsError() {
		return r.Text, err
	}
	return r.Text, nil
}

// argsOf returns the JSON arguments input stands for.
func argsOf(input, single string) json.RawMessage {
	s := strings.TrimSpace(input)
	// Models often fence JSON in Markdown.
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "```json"), "```")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
	}
	if strings.HasPrefix(s, "{") || single == "" {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(map[string]string{single: s})
	return b
}

// Definition returns the tool in the function-calling form of
// langchaingo's models.
func (t *Tool) Definition() llms.Tool {
	return llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
		Name:        t.tool.Name,
		Description: t.tool.Description(),
		Parameters:  t.tool.InputSchema,
	}}
}
