package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func (a *app) mountCommand() *cobra.Command {
	var (
		readOnly              bool
		endpoint, region, key string
	)
	c := &cobra.Command{
		Use:   "mount ID s3://BUCKET[/PREFIX] | gs://BUCKET[/PREFIX] PATH",
		Short: "Mount an S3 or GCS bucket in a sandbox",
		Long: `Mount a bucket at PATH, an absolute path inside the sandbox (started if
stopped). The FUSE tool (s3fs, gcsfuse) runs on the host and the credentials
never enter the sandbox. The mount is kept across stops and made again at
every start, until 'agentbox unmount'.

Credentials come from the environment, never from the command line:
  s3://  S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY (and S3_SESSION_TOKEN),
         S3_REGION, S3_ENDPOINT (R2, MinIO and other S3-compatible services)
  gs://  GCS_SERVICE_ACCOUNT_KEY (the service-account key's JSON)
or from --credentials-file: for s3:// a file of one line
ACCESS_KEY_ID:SECRET_ACCESS_KEY (s3fs's passwd format), for gs:// the
service-account key file.`,
		Example: `  S3_ACCESS_KEY_ID=… S3_SECRET_ACCESS_KEY=… agentbox mount default s3://data/team /mnt/data
  agentbox mount default s3://data /mnt/data --endpoint http://127.0.0.1:9000 --read-only
  agentbox mount default gs://my-bucket /mnt/gcs --credentials-file key.json`,
		Args: exactArgs(3, "a sandbox id, a bucket URL and a path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, id, path := cmd.Context(), args[0], args[2]
			fs, err := a.bucketFilesystem(args[1], readOnly, endpoint, region, key)
			if err != nil {
				return err
			}
			if _, err := a.lookup(ctx, id); err != nil {
				return notFound(err, id)
			}
			box, err := a.engine.Open(ctx, OpenOptions{StateDir: a.stateDir, ID: id})
			if err != nil {
				return err
			}
			defer box.Detach(context.WithoutCancel(ctx))
			if err := sandbox.Mount(ctx, box, fs, path); err != nil {
				return mountError(err)
			}
			if !a.json {
				fmt.Fprintf(cmd.OutOrStdout(), "mounted %s at %s\n", fs, path)
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&readOnly, "read-only", false, "mount read-only")
	f.StringVar(&endpoint, "endpoint", "", "the `URL` of an S3-compatible service or GCS emulator (default: $S3_ENDPOINT for s3://)")
	f.StringVar(&region, "region", "", "the bucket's `REGION` (default: $S3_REGION, else us-east-1)")
	f.StringVar(&key, "credentials-file", "", "read the credentials from `FILE` instead of the environment")
	return c
}

func (a *app) unmountCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "unmount ID PATH",
		Aliases: []string{"umount"},
		Short:   "Unmount a bucket from a sandbox; its credentials are deleted",
		Args:    exactArgs(2, "a sandbox id and the mount's path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, id, path := cmd.Context(), args[0], args[1]
			if _, err := a.lookup(ctx, id); err != nil {
				return notFound(err, id)
			}
			box, err := a.engine.Open(ctx, OpenOptions{StateDir: a.stateDir, ID: id})
			if err != nil {
				return err
			}
			defer box.Detach(context.WithoutCancel(ctx))
			if err := sandbox.Unmount(ctx, box, path); err != nil {
				if errors.Is(err, sandbox.ErrNotFound) {
					return notFoundf("nothing is mounted at %s in sandbox %q (see 'agentbox sandbox info %s')", path, id, id)
				}
				return mountError(err)
			}
			if !a.json {
				fmt.Fprintf(cmd.OutOrStdout(), "unmounted %s\n", path)
			}
			return nil
		},
	}
}

// mountError turns bad input into a usage error.
func mountError(err error) error {
	if errors.Is(err, sandbox.ErrInvalidArgument) {
		return usagef("%v", err)
	}
	return err
}

// bucketFilesystem returns the filesystem of a bucket URL (s3:// or gs://)
// with its credentials from the environment or keyFile.
func (a *app) bucketFilesystem(u string, readOnly bool, endpoint, region, keyFile string) (sandbox.Filesystem, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || rest == "" {
		return nil, usagef("bucket %q: give s3://BUCKET[/PREFIX] or gs://BUCKET[/PREFIX]", u)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	var key []byte
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, usagef("--credentials-file: %v", err)
		}
		key = b
	}
	env := a.cfg.Getenv
	var fs sandbox.Filesystem
	switch scheme {
	case "s3":
		s := &mount.S3Filesystem{Bucket: bucket, Prefix: prefix, ReadOnly: readOnly,
			Region: first(region, env(mount.EnvS3Region)), Endpoint: first(endpoint, env(mount.EnvS3Endpoint)),
			AccessKeyID: env(mount.EnvS3AccessKeyID), SecretAccessKey: env(mount.EnvS3SecretAccessKey), SessionToken: env(mount.EnvS3SessionToken)}
		if key != nil {
			id, secret, ok := strings.Cut(strings.TrimSpace(string(key)), ":")
			if !ok || id == "" || secret == "" {
				return nil, usagef("--credentials-file %s: for s3:// it holds one line ACCESS_KEY_ID:SECRET_ACCESS_KEY", keyFile)
			}
			s.AccessKeyID, s.SecretAccessKey, s.SessionToken = id, secret, ""
		}
		fs = s
	case "gs":
		g := &mount.GCSFilesystem{Bucket: bucket, Prefix: prefix, ReadOnly: readOnly, Endpoint: endpoint, ProjectID: env(mount.EnvGCSProjectID)}
		if g.Endpoint == "" {
			g.Endpoint = env(mount.EnvGCSEndpoint)
		}
		if key == nil && env(mount.EnvGCSServiceAccountKey) != "" {
			key = []byte(env(mount.EnvGCSServiceAccountKey))
		}
		g.Credentials = key
		fs = g
	default:
		return nil, usagef("bucket %q: the scheme is s3:// or gs://, not %s://", u, scheme)
	}
	if err := fs.(interface{ Validate() error }).Validate(); err != nil {
		return nil, usagef("%v", err)
	}
	return fs, nil
}

// first returns the first non-empty string.
func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
