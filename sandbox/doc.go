// Package sandbox defines the contract every agentbox engine implements: a
// [Sandbox] that runs shell commands in isolation, the [ProcessManager] for
// background processes, and the shared lifecycle rules engines embed through
// [Lifecycle].
//
// The meaning of every type follows Mastra's workspace sandbox contract; the
// shape follows the Go standard library (os/exec in particular).
package sandbox
