package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/local/image/build"
	"github.com/google/go-containerregistry/pkg/name"
)

// Tenancy of images. Every image reference a tenant gives (a snapshot's
// imageName, a Dockerfile's FROM and COPY --from, a create's snapshot)
// names one of:
//
//   - a snapshot of the caller's organization, which the image store keeps
//     as orgImagePrefix + ORG + ":" + NAME (orgImageName), so that no
//     other organization, and no name the operator types, ever finds it;
//   - an image the operator published (Options.PublishedImages), by the
//     name it has in the store;
//   - a registry reference, which a build pulls anonymously into the
//     organization's own copy (pullImageName), never reading an image the
//     operator or another organization has under that name.
//
// Never a host path, an oci: layout, a tarball, an image id or a prefix
// of one: checkImageRef refuses those with 400 before anything is read.

// Name prefixes of the store's images that belong to organizations.
const (
	orgImagePrefix  = "agentbox-org:"
	pullImagePrefix = "agentbox-pull:"
)

// orgImageName is the store's name of snapshot name of organization org.
func orgImageName(org, name string) string { return orgImagePrefix + org + ":" + name }

// orgOfImageName splits a store name made by orgImageName; ok is false for
// any other name.
func orgOfImageName(storeName string) (org, name string, ok bool) {
	rest, ok := strings.CutPrefix(storeName, orgImagePrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ":")
}

// pullImageName is the store's name of organization org's pull of the
// registry reference canonical (fully qualified).
func pullImageName(org, canonical string) string {
	return pullImagePrefix + org + ":" + canonical
}

// sandboxBuildName is the store's name of the image a sandbox of
// organization org created from dockerfile is made of: of the
// organization too, as what its FROM names depends on the organization.
func sandboxBuildName(org, dockerfile string) string {
	sum := sha256.Sum256([]byte(org + "\x00" + dockerfile))
	return sandboxBuildPrefix + hex.EncodeToString(sum[:8])
}

// checkImageRef refuses (400) an image reference that is not a registry
// reference: a host path, an oci: layout, a tarball, an image id. It
// returns the reference fully qualified ("python:3.12-slim" is
// "index.docker.io/library/python:3.12-slim").
func checkImageRef(ref string) (string, error) {
	refuse := func(why string) (string, error) {
		return "", errorf(http.StatusBadRequest,
			"image %q: %s; agentbox serve takes registry references (e.g. python:3.12-slim, ghcr.io/org/img:tag) and the snapshots of your organization only", ref, why)
	}
	switch {
	case ref == "":
		return refuse("empty reference")
	case strings.HasPrefix(ref, "oci:"):
		return refuse("OCI layout folders of the server's host are not available through the API")
	case looksLikePath(ref):
		return refuse("files and folders of the server's host are not available through the API")
	case strings.HasPrefix(ref, "sha256:"):
		return refuse("image ids are not available through the API")
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return refuse("not an image reference")
	}
	c := r.Name()
	if looksLikePath(c) {
		return refuse("files and folders of the server's host are not available through the API")
	}
	return c, nil
}

// looksLikePath reports whether the image store would take ref for a
// file or folder of the host (image.isLocalPath, and more: any path
// element).
func looksLikePath(ref string) bool {
	return filepath.IsAbs(ref) || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") || strings.HasPrefix(ref, "~") ||
		ref == "." || ref == ".." || strings.Contains(ref, "/../") || strings.Contains(ref, "/./") ||
		strings.HasSuffix(ref, ".tar") || strings.HasSuffix(ref, ".tar.gz") || strings.HasSuffix(ref, ".tgz") ||
		strings.ContainsRune(ref, '\\')
}

// dockerfileRefs returns the image references dockerfile's FROM and
// COPY --from instructions name as written: not those naming earlier
// stages, not scratch, not those made of build arguments ($NAME), which
// the build's resolver checks when it expands them.
func dockerfileRefs(dockerfile string) ([]string, error) {
	df, err := build.Parse(strings.NewReader(dockerfile))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "buildInfo.dockerfileContent: %v", err)
	}
	var stages, refs []string
	add := func(ref string) {
		switch {
		case strings.EqualFold(ref, "scratch"), strings.Contains(ref, "$"), slices.Contains(stages, strings.ToLower(ref)):
		default:
			refs = append(refs, ref)
		}
	}
	for _, in := range df.Instructions {
		switch in.Cmd {
		case "FROM":
			if len(in.Args) == 0 {
				continue
			}
			add(in.Args[0])
			if len(in.Args) == 3 && strings.EqualFold(in.Args[1], "AS") {
				stages = append(stages, strings.ToLower(in.Args[2]))
			} else {
				stages = append(stages, "")
			}
		case "COPY", "ADD":
			for _, f := range in.Flags {
				if v, ok := strings.CutPrefix(f, "--from="); ok {
					if isIndex(v, len(stages)) {
						continue
					}
					add(v)
				}
			}
		}
	}
	return refs, nil
}

// isIndex reports whether v is the number of one of n earlier stages.
func isIndex(v string, n int) bool {
	if v == "" || strings.Trim(v, "0123456789") != "" || len(v) > 4 {
		return false
	}
	k := 0
	for _, c := range v {
		k = k*10 + int(c-'0')
	}
	return k < n
}
