// Package localtest helps the tests of packages built on local sandboxes
// (workspace, tools, mcp, adapters): a TestMain and a sandbox per test.
// It exists on Linux only, as local sandboxes do.
package localtest
