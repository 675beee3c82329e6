package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoStorageClients: agentbox's binary is also every local
// sandbox's init, re-executed at each start, so what it links it also
// initializes at each start. The cloud storage clients (package
// mount/bucket: minio-go, cloud.google.com/go/storage and its gRPC and
// telemetry stack) more than doubled its package inits and its size:
// they stay out of it.
func TestBinaryLinksNoStorageClients(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/minio/", "cloud.google.com/", "google.golang.org/grpc", "github.com/agentbox-dev/agentbox/mount/bucket"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("agentbox links %s", p)
			}
		}
	}
}
