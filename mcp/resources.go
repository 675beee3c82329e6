package mcp

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/workspace"
)

// MaxResourceBytes bounds a file read as a resource (16 MiB). A larger
// file is refused from its size, before it is read (and one that grows
// past the limit while read, after limit+1 bytes), with an error pointing
// to the tools, which read a file in parts.
const MaxResourceBytes = 16 << 20

// addResources serves the sandbox's files as resources file:///{path}.
func (s *Server) addResources() {
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "sandbox-file",
		Title:       "A file of the sandbox",
		Description: "A file of the workspace's sandbox, by its absolute path: file:///home/agent/notes.txt",
		URITemplate: "file:///{+path}",
	}, s.readResource)
}

func (s *Server) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	p := path.Clean(u.Path)
	data, err := s.set.Workspace().ReadFileLimit(ctx, p, MaxResourceBytes)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if errors.Is(err, workspace.ErrTooLarge) {
		return nil, fmt.Errorf("%w; a resource has at most 16 MiB: read the file with the read_file tool instead", err)
	}
	if err != nil {
		return nil, err
	}
	mt := mime.TypeByExtension(path.Ext(p))
	if mt == "" {
		mt = http.DetectContentType(data)
	}
	c := &sdk.ResourceContents{URI: uri, MIMEType: mt}
	if utf8.Valid(data) {
		c.Text = string(data)
	} else {
		c.Blob = data
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}, nil
}
