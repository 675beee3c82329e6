// Package mount describes cloud buckets a sandbox can mount and how to
// mount them: [S3Filesystem] (AWS S3, Cloudflare R2, MinIO and other
// S3-compatible services) and [GCSFilesystem] (Google Cloud Storage).
//
// Each filesystem gives a FUSE mount [Plan] through [NewPlan]: the tool (s3fs, gcsfuse), its arguments (never a
// secret), its environment and the credential files it reads, to be
// written with mode 0600 before it runs. Engines run a plan where they
// mount: package local on the host, binding the mount into the sandbox so
// that credentials never enter it; a remote engine inside its sandbox.
// Package mount/bucket gives host-side access to a filesystem's bucket
// (read, write, list and delete objects, streamed).
//
// Credentials never appear in a filesystem's String, GoString, JSON or
// slog value, nor in a Plan's String or in errors of this package. Only
// [Marshal] writes them, for an engine to keep in private storage.
//
// Markers and config hashes ([MarkerName], [ConfigHash]) follow Mastra's
// MountManager, so that a mount already in place with the same
// configuration is recognised and kept.
package mount
