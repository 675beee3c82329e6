package bucket

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agentbox-dev/agentbox/internal/redact"
	"github.com/agentbox-dev/agentbox/mount"
)

// s3Bucket is a Bucket of an mount.S3Filesystem, through minio-go.
type s3Bucket struct {
	fs     mount.S3Filesystem
	prefix string
	c      *minio.Client
}

func openS3(f mount.S3Filesystem) (*s3Bucket, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	host, secure := "s3.amazonaws.com", true
	lookup := minio.BucketLookupAuto
	if f.Endpoint != "" {
		u, _ := url.Parse(f.Endpoint) // validated
		host, secure = u.Host, u.Scheme == "https"
		lookup = minio.BucketLookupPath
	}
	opts := &minio.Options{Secure: secure, BucketLookup: lookup, Region: f.Region}
	if f.Region == "auto" || (f.Region == "" && f.Endpoint == "") {
		opts.Region = "us-east-1"
	}
	if f.AccessKeyID != "" && f.SecretAccessKey != "" {
		opts.Creds = credentials.NewStaticV4(f.AccessKeyID, f.SecretAccessKey, f.SessionToken)
	} else {
		opts.Creds = credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
	}
	c, err := minio.New(host, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", f, redact.Text(err.Error(), f.Secrets()...))
	}
	return &s3Bucket{fs: f, prefix: strings.Trim(f.Prefix, "/"), c: c}, nil
}

// err explains err of op on name, without credentials.
func (b *s3Bucket) err(op, name string, err error) error {
	var kind error
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NoSuchKey":
		kind = fs.ErrNotExist
	case "NoSuchBucket":
		kind = mount.ErrBucketNotFound
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
		kind = mount.ErrAccessDenied
	}
	return explain(op, name, b.fs, kind, err)
}

func (b *s3Bucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return nil, err
	}
	// GetObject makes no request until the first read: stat first, so a
	// missing object fails here.
	obj, err := b.c.GetObject(ctx, b.fs.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, b.err("open", name, err)
	}
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		return nil, b.err("open", name, err)
	}
	return &s3Reader{obj: obj, b: b, name: name}, nil
}

// s3Reader explains the errors of a minio object.
type s3Reader struct {
	obj  *minio.Object
	b    *s3Bucket
	name string
}

func (r *s3Reader) Read(p []byte) (int, error) {
	n, err := r.obj.Read(p)
	if err != nil && err != io.EOF {
		err = r.b.err("read", r.name, err)
	}
	return n, err
}

func (r *s3Reader) Close() error { return r.obj.Close() }

func (b *s3Bucket) Create(ctx context.Context, name string) (io.WriteCloser, error) {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return nil, err
	}
	if b.fs.ReadOnly {
		return nil, fmt.Errorf("write %s %s: %w: the filesystem is read-only", b.fs, name, fs.ErrPermission)
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{pw: pw, done: make(chan error, 1)}
	go func() {
		// Size -1: minio uploads parts of PartSize as they fill.
		_, err := b.c.PutObject(ctx, b.fs.Bucket, key, pr, -1, minio.PutObjectOptions{PartSize: 16 << 20, DisableContentSha256: true})
		if err != nil {
			err = b.err("write", name, err)
		}
		pr.CloseWithError(err)
		w.done <- err
	}()
	return w, nil
}

// pipeWriter is the writer end of an upload running on a goroutine.
type pipeWriter struct {
	pw   *io.PipeWriter
	done chan error
}

func (w *pipeWriter) Write(p []byte) (int, error) { return w.pw.Write(p) }

func (w *pipeWriter) Close() error {
	w.pw.Close()
	return <-w.done
}

func (b *s3Bucket) Stat(ctx context.Context, name string) (ObjectInfo, error) {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return ObjectInfo{}, err
	}
	st, err := b.c.StatObject(ctx, b.fs.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, b.err("stat", name, err)
	}
	return ObjectInfo{Name: name, Size: st.Size, ModTime: st.LastModified}, nil
}

func (b *s3Bucket) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		full := strings.TrimPrefix(prefix, "/")
		if b.prefix != "" {
			full = b.prefix + "/" + full
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for o := range b.c.ListObjects(ctx, b.fs.Bucket, minio.ListObjectsOptions{Prefix: full, Recursive: true}) {
			if o.Err != nil {
				yield(ObjectInfo{}, b.err("list", prefix, o.Err))
				return
			}
			if !yield(ObjectInfo{Name: relName(b.prefix, o.Key), Size: o.Size, ModTime: o.LastModified}, nil) {
				return
			}
		}
	}
}

func (b *s3Bucket) Delete(ctx context.Context, name string) error {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return err
	}
	if err := b.c.RemoveObject(ctx, b.fs.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil
		}
		return b.err("delete", name, err)
	}
	return nil
}

func (b *s3Bucket) Close() error { return nil }
