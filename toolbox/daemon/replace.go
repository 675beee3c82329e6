package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"syscall"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// replaceChunk is the read size of POST /files/replace: files are streamed
// through buffers of about this size, whatever their length.
const replaceChunk = 64 << 10

// handleReplace is POST /files/replace: in each file, every occurrence of
// pattern (a literal string) becomes newValue. The request is checked
// whole before any file is touched; a file without the pattern is left as
// it is; a changed file is written to a temporary file beside it, given
// the original's mode and owner, and renamed over it.
func (s *Server) handleReplace(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.ReplaceRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Files) == 0 {
		return badRequest("files must list at least one file")
	}
	if req.Pattern == "" {
		return badRequest("pattern is empty: give the text to replace")
	}
	paths := make([]string, len(req.Files))
	for i, f := range req.Files {
		p, err := s.resolve(f)
		if err != nil {
			return err
		}
		paths[i] = p
	}
	old, repl := []byte(req.Pattern), []byte(req.NewValue)
	out := make([]toolbox.ReplaceResult, len(paths))
	for i, p := range paths {
		out[i] = toolbox.ReplaceResult{File: req.Files[i], Success: true}
		if err := s.replaceInFile(p, old, repl); err != nil {
			out[i].Success, out[i].Error = false, err.Error()
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// replaceInFile replaces old by repl in the regular file at p (through
// symbolic links, followed inside the root: the file they name is
// rewritten and the links stay).
func (s *Server) replaceInFile(p string, old, repl []byte) error {
	dir, name, real, err := s.root.resolveLinks(p)
	if err != nil {
		return describeFSError(p, err)
	}
	defer dir.Close()
	f, err := openAt(dir, name, real)
	if err != nil {
		return describeFSError(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return describeFSError(p, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	found, err := containsStream(f, old)
	if err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	if !found {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	return rewriteFile(dir, name, real, fi, func(dst io.Writer) error {
		return replaceStream(dst, f, old, repl)
	})
}

// rewriteFile writes a new content for the file name of the folder dir
// (real, as the sandbox sees it, described by fi) with write, into a
// temporary file in the same folder that gets fi's mode and owner before
// it is renamed over name. On failure the file is unchanged.
func rewriteFile(dir *os.File, name, real string, fi fs.FileInfo, write func(io.Writer) error) (err error) {
	tmp, tmpName, err := createTempAt(dir, "."+name+".agentbox-")
	if err != nil {
		return fmt.Errorf("cannot write beside %s (its folder must be writable): %w", real, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			_ = removeAtName(dir, tmpName)
		}
	}()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil {
			return fmt.Errorf("cannot give the new content of %s its owner %d:%d: %w", real, st.Uid, st.Gid, err)
		}
	}
	// After chown, which clears set-user-ID and set-group-ID bits.
	if err := tmp.Chmod(fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return fmt.Errorf("cannot give the new content of %s its mode: %w", real, err)
	}
	bw := bufio.NewWriterSize(tmp, replaceChunk)
	if err := write(bw); err != nil {
		return fmt.Errorf("rewriting %s: %w", real, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", real, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", real, err)
	}
	if err := renameAtNames(dir, tmpName, name); err != nil {
		return fmt.Errorf("replacing %s: %w", real, err)
	}
	return nil
}

// describeFSError says in words what a file-system error means for p.
func describeFSError(p string, err error) error {
	var he *httpError
	if errors.As(fsError(p, err), &he) {
		return errors.New(he.msg)
	}
	return err
}

// containsStream reports whether r holds pat, reading it in chunks.
func containsStream(r io.Reader, pat []byte) (bool, error) {
	found := false
	err := scanChunks(r, len(pat), func(buf []byte, final bool) (int, error) {
		if bytes.Contains(buf, pat) {
			found = true
			return 0, errStopScan
		}
		return keepFrom(len(buf), len(pat), final), nil
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return found, err
}

// replaceStream copies src to dst with every occurrence of old replaced by
// repl, reading in chunks: memory stays bounded whatever src's length.
func replaceStream(dst io.Writer, src io.Reader, old, repl []byte) error {
	return scanChunks(src, len(old), func(buf []byte, final bool) (int, error) {
		done := 0
		for {
			i := bytes.Index(buf[done:], old)
			if i < 0 {
				break
			}
			if _, err := dst.Write(buf[done : done+i]); err != nil {
				return 0, err
			}
			if _, err := dst.Write(repl); err != nil {
				return 0, err
			}
			done += i + len(old)
		}
		keep := keepFrom(len(buf), len(old), final)
		if keep > done {
			if _, err := dst.Write(buf[done:keep]); err != nil {
				return 0, err
			}
			done = keep
		}
		return done, nil
	})
}

var errStopScan = errors.New("stop scanning")

// keepFrom is where in a buffer of n bytes the part that may still begin
// an occurrence of a pattern of patLen bytes starts (n when final).
func keepFrom(n, patLen int, final bool) int {
	if final {
		return n
	}
	return max(0, n-(patLen-1))
}

// scanChunks reads r into a buffer and calls fn with what is buffered;
// fn returns how many leading bytes it is done with, and the rest is kept
// for the next call. final is set on the last call.
func scanChunks(r io.Reader, patLen int, fn func(buf []byte, final bool) (int, error)) error {
	buf := make([]byte, 0, replaceChunk+patLen)
	for {
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		final := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !final {
			return err
		}
		done, ferr := fn(buf, final)
		if ferr != nil {
			return ferr
		}
		if final {
			return nil
		}
		buf = buf[:copy(buf, buf[done:])]
		if len(buf) == cap(buf) {
			// fn kept everything: grow, so the next read makes progress.
			buf = append(buf, make([]byte, replaceChunk)...)[:len(buf)]
		}
	}
}
