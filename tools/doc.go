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
// by that handle, page by page. What the host reads of the sandbox is
// bounded too, whatever the sandbox holds: read_file reads at most
// Config.MaxReadFileBytes of a file and says when it stopped, edit_file
// refuses a file larger than Config.MaxEditFileBytes from its size before
// reading it, and lists and search results are bounded by the toolbox
// client (toolbox.MaxJSONBytes) before they are cut to what a model is
// shown.
//
// An approval gate (Config.Approve, CallOptions.Approve) sees every
// command and every change to a file before it happens, and may refuse
// it: the agent then gets a tool error saying so.
package tools
