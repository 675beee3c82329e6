// Package mcp serves a workspace's tools (package tools) to MCP clients —
// desktop and IDE agents, agent frameworks with an MCP tool set — with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk), over stdio or
// streamable HTTP.
//
// A command's progress reaches the client as progress notifications while
// it runs (when the client's call carries a progress token); cancelling
// the call kills the command. The sandbox's files are resources under
// file:///{path}. With Options.AskApproval the user approves every command
// and every change to a file through an MCP elicitation, where the client
// supports it; a client that cannot ask is refused.
//
// Tool errors, bad arguments and refusals included, are tool results
// with isError set and a text saying what went wrong, never protocol
// errors: the agent reads them and goes on.
package mcp
