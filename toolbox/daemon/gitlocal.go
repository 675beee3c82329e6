package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// localTransport makes go-git serve file:// remotes (and local paths) in
// this process. go-git's own file transport runs git-upload-pack and
// git-receive-pack, which a sandbox need not have. The transport registry
// is go-git's, shared by the whole process, so it is installed once, on
// the first local remote operation (not at package init).
var localTransport sync.Once

func (s *Server) useLocalTransport() {
	localTransport.Do(func() {
		client.InstallProtocol("file", localGitTransport{server.NewServer(repoLoader{})})
	})
}

// repoLoader loads the repository of a local path, with a working tree
// (its .git folder) or bare.
type repoLoader struct{}

func (repoLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	dir := ep.Path
	if fi, err := os.Stat(filepath.Join(dir, git.GitDirName)); err == nil && fi.IsDir() {
		dir = filepath.Join(dir, git.GitDirName)
	} else if _, err := os.Stat(filepath.Join(dir, "config")); err != nil {
		return nil, fmt.Errorf("%w: %s", transport.ErrRepositoryNotFound, ep.Path)
	}
	if _, err := os.Stat(filepath.Join(dir, "objects")); err != nil {
		return nil, fmt.Errorf("%w: %s", transport.ErrRepositoryNotFound, ep.Path)
	}
	return filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault()), nil
}

// localGitTransport is go-git's in-process server for local repositories,
// with one fix: a fetch whose client has commits the served repository
// lacks (a local branch ahead of its remote) must not fail. go-git's
// server looks up every commit the client says it has, so the ones it
// does not know are left out of the request.
type localGitTransport struct{ transport.Transport }

func (t localGitTransport) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	sess, err := t.Transport.NewUploadPackSession(ep, auth)
	if err != nil {
		return nil, err
	}
	st, err := repoLoader{}.Load(ep)
	if err != nil {
		sess.Close()
		return nil, err
	}
	return &knownHaves{UploadPackSession: sess, st: st}, nil
}

// knownHaves is an upload-pack session that drops the haves its
// repository does not hold.
type knownHaves struct {
	transport.UploadPackSession
	st storer.EncodedObjectStorer
}

func (s *knownHaves) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	known := req.Haves[:0:0]
	for _, h := range req.Haves {
		if s.st.HasEncodedObject(h) == nil {
			known = append(known, h)
		}
	}
	req.Haves = known
	return s.UploadPackSession.UploadPack(ctx, req)
}
