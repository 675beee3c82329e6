// Package workspace puts a sandbox in an agent's hands: the sandbox, its
// files through the sandbox's toolbox API, the rules that place relative
// paths and commands in one working directory, and the instructions that
// describe all of it to a model.
//
// Package tools builds an agent's tools over a Workspace, and package mcp
// serves them to MCP clients.
//
// # Working directory
//
// A relative path, of a file or of a command's cwd, is taken relative to
// the workspace's working directory: Config.WorkingDirectory when set,
// else the sandbox's own default (the toolbox server's working directory,
// asked once). Absolute paths are used as they are. Commands without a cwd
// run in Config.WorkingDirectory when it is set, else in the sandbox's
// default.
//
// # Sizes
//
// The sandbox decides how large its files are; the host decides how much
// it holds. ReadFile reads at most DefaultMaxReadFileBytes, ReadFileLimit
// a limit of the caller's: a larger file is refused from its size before
// it is read, one that grows past the limit after limit+1 bytes (a
// [FileTooLargeError], matching ErrTooLarge). OpenFile streams a file of
// any size. Lists and search results are bounded by the toolbox client
// (toolbox.MaxJSONBytes).
//
// # Mounts
//
// Filesystems mounted into the sandbox (S3, GCS buckets; package mount)
// plug in through Config.Mounts, a [Mounts]: the workspace mounts them
// when it starts the sandbox and adds their description to its
// instructions. [NewFilesystemMounts] is the Mounts of a map from paths to
// filesystems, mounted with sandbox.Mount on engines that implement
// sandbox.Mounter (the daytona engine runs s3fs or gcsfuse inside its
// sandbox); a failed mount does not fail the start, and its state and
// error show in Instructions and in the sandbox's Info.
package workspace
