//go:build linux

package mounttest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/s3test"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/mount/bucket"
)

const largeSize = 256 << 20

// A 256 MiB file written in the sandbox is streamed to the bucket and
// read back through the bucket API (TestMountS3 covers the other way).
func TestMountS3LargeFile(t *testing.T) {
	needFUSE(t, "s3fs")
	ctx := context.Background()
	srv := s3test.Start(t, "data")
	sb := newSandbox(t, local.Options{ID: "mount-large", StateDir: newStateDir(t)})
	fsys := s3Filesystem(srv, "data")
	bucket, err := bucket.Open(ctx, fsys)
	if err != nil {
		t.Fatal(err)
	}
	at := mustRun(t, sb, "printf %s $HOME") + "/bucket"
	if err := sb.Mount(ctx, fsys, at); err != nil {
		t.Fatal(err)
	}
	n := strconv.Itoa(largeSize)
	sum := strings.Fields(mustRun(t, sb, "head -c "+n+" /dev/urandom | tee "+at+"/in.bin | sha256sum"))[0]
	r, err := bucket.Open(ctx, "in.bin")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	got, err := io.Copy(h, r)
	r.Close()
	if err != nil || got != largeSize || hex.EncodeToString(h.Sum(nil)) != sum {
		t.Fatalf("read through the API: %d bytes, %v; sha256 differs: %v", got, err, hex.EncodeToString(h.Sum(nil)) != sum)
	}

}

// BenchmarkMountS3 compares sequential reads and writes of 256 MiB
// through an s3fs mount in a sandbox with the bucket API (minio-go) on the
// same loopback S3 server.
func BenchmarkMountS3(b *testing.B) {
	testenv.NeedRoot(b, "bucket mounts need root")
	testenv.NeedTool(b, "s3fs", "s3fs")
	ctx := context.Background()
	srv := s3test.Start(b, "data")
	sb := newSandbox(b, local.Options{ID: "mount-bench", StateDir: newStateDir(b)})
	fsys := s3Filesystem(srv, "data")
	bucket, err := bucket.Open(ctx, fsys)
	if err != nil {
		b.Fatal(err)
	}
	at := mustRun(b, sb, "printf %s $HOME") + "/bucket"
	if err := sb.Mount(ctx, fsys, at); err != nil {
		b.Fatal(err)
	}
	n := strconv.Itoa(largeSize)
	b.Run("api-write", func(b *testing.B) {
		b.SetBytes(largeSize)
		for b.Loop() {
			w, err := bucket.Create(ctx, "api.bin")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(w, io.LimitReader(zeros{}, largeSize)); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("api-read", func(b *testing.B) {
		b.SetBytes(largeSize)
		for b.Loop() {
			r, err := bucket.Open(ctx, "api.bin")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, r); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
	})
	b.Run("mount-write", func(b *testing.B) {
		b.SetBytes(largeSize)
		for b.Loop() {
			mustRun(b, sb, "head -c "+n+" /dev/zero > "+at+"/mount.bin")
		}
	})
	b.Run("mount-read", func(b *testing.B) {
		b.SetBytes(largeSize)
		for b.Loop() {
			mustRun(b, sb, "cat "+at+"/mount.bin > /dev/null")
		}
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
