package bucket_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/agentbox-dev/agentbox/internal/s3test"
	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/mount/bucket"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func s3FS(srv *s3test.Server, bucket string) *mount.S3Filesystem {
	return &mount.S3Filesystem{Bucket: bucket, Region: srv.Region, Endpoint: srv.URL, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}
}

func TestS3Bucket(t *testing.T) {
	srv := s3test.Start(t, "data")
	fsys := s3FS(srv, "data")
	fsys.Prefix = "team/"
	testBucket(t, fsys)
	// The prefix is where the objects are.
	whole, err := bucket.Open(context.Background(), s3FS(srv, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whole.Stat(context.Background(), "team/kept.txt"); err != nil {
		t.Fatalf("object not under the prefix: %v", err)
	}
}

func TestGCSBucket(t *testing.T) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Port: 0,
		InitialObjects: []fakestorage.Object{{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "data", Name: "seed"}, Content: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	testBucket(t, &mount.GCSFilesystem{Bucket: "data", Endpoint: srv.URL() + "/storage/v1/", Prefix: "team"})
}

// testBucket writes, reads, lists and deletes objects of fsys, then
// checks the errors of a missing object and a missing bucket.
func testBucket(t *testing.T, fsys sandbox.Filesystem) {
	ctx := context.Background()
	b, err := bucket.Open(ctx, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	for _, name := range []string{"a/big.bin", "kept.txt"} {
		w, err := b.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("upload %s: %v", name, err)
		}
	}
	r, err := b.Open(ctx, "a/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	st, err := b.Stat(ctx, "a/big.bin")
	if err != nil || st.Size != int64(len(data)) {
		t.Fatalf("Stat = %+v, %v", st, err)
	}
	var names []string
	for o, err := range b.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "a/big.bin,kept.txt" {
		t.Fatalf("List = %v", names)
	}
	if err := b.Delete(ctx, "a/big.bin"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "a/big.bin"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	if _, err := b.Open(ctx, "a/big.bin"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a deleted object: %v, want fs.ErrNotExist", err)
	}
	if _, err := b.Stat(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a missing object: %v, want fs.ErrNotExist", err)
	}
}

func TestS3Errors(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t, "data")
	missing, err := bucket.Open(ctx, s3FS(srv, "no-such-bucket"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := missing.Stat(ctx, "x"); !errors.Is(err, mount.ErrBucketNotFound) && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing bucket: %v", err)
	}
	bad := s3FS(srv, "data")
	bad.AccessKeyID, bad.SecretAccessKey = "AKIAWRONGKEY", "wrong-secret-value-123"
	b, err := bucket.Open(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Stat(ctx, "x")
	if !errors.Is(err, mount.ErrAccessDenied) {
		t.Fatalf("wrong credentials: %v, want ErrAccessDenied", err)
	}
	if strings.Contains(err.Error(), "wrong-secret-value-123") {
		t.Fatalf("error leaks the secret: %v", err)
	}
}
