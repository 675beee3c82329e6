// Package landlock scopes the IPC of a sandbox's commands with Linux's
// Landlock LSM (landlock(7)): a thread put in a domain of its own, and
// every process it forks, can no longer connect to abstract unix sockets
// or send signals outside that domain.
//
// It enforces a ruleset on the calling OS thread alone, not on every
// thread of the process as go-landlock's Restrict functions do. On
// systems other than Linux, ABI reports 0.
package landlock

// ScopeABI is the first Landlock ABI with IPC scoping, which is what
// RestrictThreadScopes needs to do anything.
const ScopeABI = 6
