// Package tools gives an agent the tools of a [workspace.Workspace]: run a
// command (in the foreground, or in the background and then poll its
// output with a cursor, write to its stdin, kill it, list processes), and
// read, write, edit, list, find and delete files.
//
// Each [Tool] has a name, a description that includes the workspace's
// instructions, a JSON schema of its input, and a handler that validates
// the input against the schema and returns a [Result]: text for the model
// and structured data. Every failure, a bad input or a refusal included,
// is a Result whose Err is set and whose Text tells the model what went
// wrong: tools never fail an agent's loop. The same handlers are methods
// of [Set] with typed inputs and outputs, for Go callers.
//
// Output handed to a model is bounded: a command's output longer than
// Config.MaxOutputBytes keeps its head and tail around a marker that gives
// the byte counts and a handle, and read_output returns the whole output
// by that handle, page by page.
//
// An approval gate (Config.Approve, CallOptions.Approve) sees every
// command and every change to a file before it happens, and may refuse
// it: the agent then gets a tool error saying so.
package tools
