// Package s3test runs an S3 server in the test process (gofakes3, objects
// in memory) on a loopback port, with one key pair: requests signed with
// another access key id, or unsigned, are refused as S3 does
// (InvalidAccessKeyId, AccessDenied). The signature itself is not
// verified.
package s3test

import (
	"errors"
	"net"
	"net/http"
	"regexp"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running S3 server.
type Server struct {
	// URL is the endpoint, e.g. "http://127.0.0.1:40123".
	URL string
	// AccessKeyID and SecretAccessKey are the key pair it accepts.
	AccessKeyID     string
	SecretAccessKey string
	// Region is the region it reports.
	Region string

	backend *s3mem.Backend
}

// Start serves an S3 server on a loopback port until the test ends, with
// the buckets named.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, ln, buckets...)
}

// Serve serves an S3 server on ln until the test ends, with the buckets
// named.
func Serve(t testing.TB, ln net.Listener, buckets ...string) *Server {
	t.Helper()
	s := &Server{
		URL:             "http://" + ln.Addr().String(),
		AccessKeyID:     "AKIAS3TESTKEY0000001",
		SecretAccessKey: "s3test-secret-3b9f0c2e7a",
		Region:          "us-east-1",
		backend:         s3mem.New(),
	}
	for _, b := range buckets {
		if err := s.backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	faker := gofakes3.New(s.backend, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithAutoBucket(false))
	srv := &http.Server{Handler: s.authorize(faker.Server())}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("s3test: %v", err)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return s
}

// CreateBucket makes a bucket.
func (s *Server) CreateBucket(name string) error { return s.backend.CreateBucket(name) }

// credential finds the access key id of a SigV4 (Credential=ID/…) or
// SigV2 (AWS ID:sig) Authorization header or presigned URL.
var credential = regexp.MustCompile(`(?:Credential=|^AWS )([^/:,\s]+)`)

// authorize refuses requests signed with another access key id, and
// unsigned ones.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ""
		if m := credential.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			id = m[1]
		} else if c := r.URL.Query().Get("X-Amz-Credential"); c != "" {
			id = regexp.MustCompile(`^[^/]+`).FindString(c)
		}
		switch id {
		case s.AccessKeyID:
			next.ServeHTTP(w, r)
		case "":
			s3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
		default:
			s3Error(w, http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
		}
	})
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error><Code>" + code + "</Code><Message>" + msg + "</Message></Error>"))
}
