package mcp

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// maxResourceBytes bounds a file read as a resource.
const maxResourceBytes = 16 << 20

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
	rc, err := s.set.Workspace().OpenFile(ctx, p)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxResourceBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxResourceBytes {
		return nil, errors.New("the file is larger than 16 MiB: read it with the tools instead")
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
