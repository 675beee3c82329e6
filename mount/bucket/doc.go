// Package bucket gives the host access to the objects of a mount
// filesystem's bucket (package mount's S3Filesystem and GCSFilesystem):
// read, write, list, stat and delete, streamed, through minio-go and
// cloud.google.com/go/storage.
//
// It is a package of its own so that programs that only mount buckets
// (the local engine, whose binary is also every sandbox's init) do not
// link, and start, the storage clients.
package bucket
