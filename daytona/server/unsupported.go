package server

import (
	"net/http"
	"strings"
)

// unsupported returns the error answering a create request that asks for
// what the server does not support yet, or nil. It is the one place that
// knows. (A snapshot is an image or snapshot of the local engine's store:
// spec.image.)
func unsupported(req *createSandbox) error {
	var what []string
	if req.BuildInfo != nil && len(req.BuildInfo.ContextHashes) > 0 {
		what = append(what, "build contexts (buildInfo.contextHashes: files uploaded to object storage; build the image with `agentbox image build` and use it as the snapshot)")
	}
	if req.GPU != nil && *req.GPU > 0 {
		what = append(what, "GPUs")
	}
	if req.LinkedSandbox != "" {
		what = append(what, "linkedSandbox")
	}
	if req.OutboundProxyURL != "" {
		what = append(what, "outboundProxyUrl")
	}
	for _, v := range req.Volumes {
		if v.Subpath != "" {
			what = append(what, "volume subpaths")
			break
		}
	}
	if len(what) == 0 {
		return nil
	}
	return errorf(http.StatusNotImplemented, "agentbox serve does not support %s yet: create the sandbox without it", strings.Join(what, ", "))
}

// pushAccess answers GET /object-storage/push-access, which the SDKs ask
// before they upload the files of a build context (buildInfo's
// contextHashes) to Daytona's S3 object storage: the server has none, so
// the SDK stops there, saying why, before any upload.
func pushAccess(http.ResponseWriter, *http.Request) error {
	return errorf(http.StatusNotImplemented, "agentbox serve has no object storage for build contexts (files an image copies from this machine) yet: build the image with `agentbox image build` and use it as the snapshot, or give a Dockerfile without local files")
}
