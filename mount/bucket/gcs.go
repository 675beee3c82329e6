package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/http"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/agentbox-dev/agentbox/internal/redact"
	"github.com/agentbox-dev/agentbox/mount"
)

// gcsBucket is a Bucket of a mount.GCSFilesystem, through Google's client.
type gcsBucket struct {
	fs     mount.GCSFilesystem
	prefix string
	c      *storage.Client
	h      *storage.BucketHandle
}

func openGCS(ctx context.Context, f mount.GCSFilesystem) (*gcsBucket, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var opts []option.ClientOption
	switch {
	case len(f.Credentials) > 0 && f.Endpoint != "":
		// An emulator takes no token; Google's endpoint needs one.
		opts = append(opts, option.WithoutAuthentication())
	case len(f.Credentials) > 0:
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, f.Credentials))
	default:
		opts = append(opts, option.WithoutAuthentication())
	}
	if f.Endpoint != "" {
		// Emulators serve the JSON API only.
		opts = append(opts, option.WithEndpoint(f.Endpoint), storage.WithJSONReads())
	}
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", f, redact.Text(err.Error(), f.Secrets()...))
	}
	return &gcsBucket{fs: f, prefix: strings.Trim(f.Prefix, "/"), c: c, h: c.Bucket(f.Bucket)}, nil
}

// err explains err of op on name, without credentials.
func (b *gcsBucket) err(op, name string, err error) error {
	var kind error
	var gerr *googleapi.Error
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		kind = fs.ErrNotExist
	case errors.Is(err, storage.ErrBucketNotExist):
		kind = mount.ErrBucketNotFound
	case errors.As(err, &gerr) && (gerr.Code == http.StatusUnauthorized || gerr.Code == http.StatusForbidden):
		kind = mount.ErrAccessDenied
	case errors.As(err, &gerr) && gerr.Code == http.StatusNotFound && strings.Contains(strings.ToLower(gerr.Message), "bucket"):
		kind = mount.ErrBucketNotFound
	}
	return explain(op, name, b.fs, kind, err)
}

func (b *gcsBucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return nil, err
	}
	r, err := b.h.Object(key).NewReader(ctx)
	if err != nil {
		return nil, b.err("open", name, err)
	}
	return r, nil
}

func (b *gcsBucket) Create(ctx context.Context, name string) (io.WriteCloser, error) {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return nil, err
	}
	if b.fs.ReadOnly {
		return nil, fmt.Errorf("write %s %s: %w: the filesystem is read-only", b.fs, name, fs.ErrPermission)
	}
	w := b.h.Object(key).NewWriter(ctx)
	return &gcsWriter{w: w, b: b, name: name}, nil
}

// gcsWriter explains the errors of an upload.
type gcsWriter struct {
	w    *storage.Writer
	b    *gcsBucket
	name string
}

func (w *gcsWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = w.b.err("write", w.name, err)
	}
	return n, err
}

func (w *gcsWriter) Close() error {
	if err := w.w.Close(); err != nil {
		return w.b.err("write", w.name, err)
	}
	return nil
}

func (b *gcsBucket) Stat(ctx context.Context, name string) (ObjectInfo, error) {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return ObjectInfo{}, err
	}
	a, err := b.h.Object(key).Attrs(ctx)
	if err != nil {
		return ObjectInfo{}, b.err("stat", name, err)
	}
	return ObjectInfo{Name: name, Size: a.Size, ModTime: a.Updated}, nil
}

func (b *gcsBucket) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		full := strings.TrimPrefix(prefix, "/")
		if b.prefix != "" {
			full = b.prefix + "/" + full
		}
		it := b.h.Objects(ctx, &storage.Query{Prefix: full})
		for {
			a, err := it.Next()
			if err == iterator.Done {
				return
			}
			if err != nil {
				yield(ObjectInfo{}, b.err("list", prefix, err))
				return
			}
			if !yield(ObjectInfo{Name: relName(b.prefix, a.Name), Size: a.Size, ModTime: a.Updated}, nil) {
				return
			}
		}
	}
}

func (b *gcsBucket) Delete(ctx context.Context, name string) error {
	key, err := objectName(b.prefix, name)
	if err != nil {
		return err
	}
	if err := b.h.Object(key).Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return b.err("delete", name, err)
	}
	return nil
}

func (b *gcsBucket) Close() error { return b.c.Close() }
