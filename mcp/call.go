package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/tools"
)

// approvalKey is the id of the approval elicitation in a tool result's
// input requests.
const approvalKey = "approval"

// handler returns the MCP handler of tool t.
func (s *Server) handler(t *tools.Tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		opts := &tools.CallOptions{}
		if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
			opts.Progress = progressNotifier(ctx, req.Session, token)
		}
		if s.opts.AskApproval {
			opts.Approve = approver(req)
		}
		r := t.Call(ctx, req.Params.Arguments, opts)
		if need := (*needApproval)(nil); errors.As(r.Err, &need) {
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{approvalKey: &sdk.ElicitParams{
				Mode:    "form",
				Message: "The agent asks to " + need.action.String() + ". Accept to allow it, decline to refuse.",
			}}}, nil
		}
		res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Text}}, IsError: r.IsError()}
		if r.Data != nil {
			res.StructuredContent = r.Data
		}
		return res, nil
	}
}

// progressNotifier sends a progress notification per report, with an
// increasing progress value (the seconds the command has run).
func progressNotifier(ctx context.Context, ss *sdk.ServerSession, token any) func(tools.Progress) {
	var mu sync.Mutex
	var last float64
	return func(p tools.Progress) {
		mu.Lock()
		v := max(p.Elapsed.Seconds(), last+0.001)
		last = v
		mu.Unlock()
		msg := fmt.Sprintf("running for %.0fs, %d bytes of output", p.Elapsed.Seconds(), p.Bytes)
		if p.LastLine != "" {
			msg += ": " + p.LastLine
		}
		_ = ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: v, Message: msg})
	}
}

// needApproval is the refusal of an action the user was not asked about
// yet: the handler answers it with an elicitation, and the call comes
// again with the user's answer.
type needApproval struct{ action tools.Action }

func (e *needApproval) Error() string { return "the user's approval is needed to " + e.action.String() }

// errNoElicitation refuses an action when the client cannot ask the user.
var errNoElicitation = errors.New("this server asks the user to approve every command and change to a file, and this MCP client cannot ask (it does not support elicitation)")

// approver returns the approval gate of one call: the user's answer when
// the call carries it, else a request to ask.
func approver(req *sdk.CallToolRequest) tools.ApproveFunc {
	return func(_ context.Context, a tools.Action) error {
		if resp, ok := req.Params.InputResponses[approvalKey]; ok {
			if er, _ := resp.(*sdk.ElicitResult); er != nil && er.Action == "accept" {
				return nil
			}
			return errors.New("the user did not approve it")
		}
		if !elicits(req.Session) {
			return errNoElicitation
		}
		return &needApproval{action: a}
	}
}

// elicits reports whether the client supports elicitation.
func elicits(ss *sdk.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}
