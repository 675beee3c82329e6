package build

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// copyOp is a planned COPY or ADD.
type copyOp struct {
	add     bool
	sources []source
	// dest is the absolute destination in the image; destDir says it
	// names a folder (it ended with "/", or several files are copied).
	dest    string
	destDir bool
	chown   string  // --chown as written after substitution; "" is 0:0
	chmod   *uint32 // --chmod
	// from is the stage or image of COPY --from, whose files are read
	// when the step runs: names lists its sources then.
	from  *copyFrom
	names []string
}

// material is what the step's cache key is made of: the destination,
// options, and the names, modes and contents of the files copied.
func (op *copyOp) material() string {
	b, _ := json.Marshal(struct {
		Add     bool
		Dest    string
		DestDir bool
		Chown   string
		Chmod   *uint32
		Sources []source
		From    string
		Names   []string
	}{op.add, op.dest, op.destDir, op.chown, op.chmod, op.sources, op.from.cacheKey(), op.names})
	return string(b)
}

// copyOp plans a COPY or ADD: substitutes its arguments and reads its
// sources from the build context, so that a missing file fails the build
// before anything runs.
func (p *planner) copyOp(in Instruction) (*copyOp, error) {
	op := &copyOp{add: in.Cmd == "ADD"}
	for _, f := range in.Flags {
		name, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		v, err := p.expand(in, v)
		if err != nil {
			return nil, err
		}
		switch name {
		case "from":
			if op.from, err = p.copyFrom(in, v); err != nil {
				return nil, err
			}
		case "chown":
			op.chown = v
		case "chmod":
			m, err := parseChmod(v)
			if err != nil {
				return nil, err
			}
			op.chmod = &m
		}
	}
	var args []string
	var err error
	if in.JSON { // the exec form's strings are not unquoted again
		args, err = p.expandJSON(in, in.Args)
	} else {
		args, err = p.expandAll(in, in.Args)
	}
	if err != nil {
		return nil, err
	}
	srcs, dest := args[:len(args)-1], args[len(args)-1]
	for _, s := range srcs {
		if op.add && isURL(s) {
			return nil, fmt.Errorf("source %q: ADD of URLs is %w: download it in a RUN step, or put the file in the build context", s, ErrUnsupported)
		}
	}
	op.destDir = strings.HasSuffix(dest, "/") || dest == "." || strings.HasSuffix(dest, "/.")
	if !path.IsAbs(dest) {
		dest = path.Join("/", p.cfg.WorkingDir, dest)
	}
	op.dest = path.Clean(dest)
	if op.from != nil {
		if len(srcs) > 1 && !op.destDir {
			return nil, folderDest(args[len(args)-1])
		}
		for _, s := range srcs {
			if strings.ContainsAny(s, "*?[") {
				return nil, fmt.Errorf("source %q: patterns in COPY --from are %w: name the files or their folder", s, ErrUnsupported)
			}
			op.names = append(op.names, path.Clean("/"+s))
		}
		return op, nil
	}
	if op.sources, err = p.bc.sources(srcs); err != nil {
		return nil, err
	}
	if len(op.sources) > 1 && !op.destDir {
		return nil, folderDest(args[len(args)-1])
	}
	if op.add {
		for i := range op.sources {
			s := &op.sources[i]
			if !s.Dir && s.Entries[0].Mode.IsRegular() {
				if s.Archive, err = isArchive(s.host); err != nil {
					return nil, err
				}
			}
		}
	}
	return op, nil
}

// folderDest is the error about a destination of several files that
// does not end in /.
func folderDest(dest string) error {
	return fmt.Errorf("with several source files the destination must be a folder ending in /: write %s/", dest)
}

// expandJSON substitutes variables in the strings of an exec form, which
// keep their quotes and escapes as written.
func (p *planner) expandJSON(in Instruction, args []string) ([]string, error) {
	out := make([]string, len(args))
	x := &expander{escape: p.df.Escape, lookup: p.lookup}
	for i, a := range args {
		var b strings.Builder
		for j := 0; j < len(a); j++ {
			if a[j] != '$' {
				b.WriteByte(a[j])
				continue
			}
			k, err := x.variable([]rune(a[j:]), 0, &b)
			if err != nil {
				return nil, &LineError{Line: in.Line, Instruction: in.Cmd, Err: err}
			}
			j += len(string([]rune(a[j:])[:k+1])) - 1
		}
		out[i] = b.String()
	}
	return out, nil
}

// isURL reports whether an ADD source is a URL (or a git address), which
// agentbox does not fetch.
func isURL(s string) bool {
	for _, p := range []string{"http://", "https://", "git@", "git://", "ssh://", "ftp://"} {
		if strings.HasPrefix(strings.ToLower(s), p) {
			return true
		}
	}
	return false
}

// Archive formats recognised by their first bytes.
var (
	magicGzip  = []byte{0x1f, 0x8b}
	magicBzip2 = []byte("BZh")
	magicXz    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZstd  = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// isArchive reports whether the file at host is a tar archive (plain,
// gzip or bzip2 compressed), which ADD extracts; another file is copied.
// An xz or zstd file is an error: Docker would extract it and agentbox
// cannot.
func isArchive(host string) (bool, error) {
	f, err := os.Open(host)
	if err != nil {
		return false, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(len(magicXz))
	if bytes.HasPrefix(head, magicXz) || bytes.HasPrefix(head, magicZstd) {
		return false, fmt.Errorf("%s: ADD of xz and zstd archives is %w: use a tar, tar.gz or tar.bz2 archive, or COPY it and extract it in a RUN step", host, ErrUnsupported)
	}
	r, err := decompress(br)
	if err != nil {
		return false, nil
	}
	_, err = tar.NewReader(r).Next()
	return err == nil, nil
}

// decompress returns the content of r, gunzipped or bunzipped when its
// first bytes say so.
func decompress(br *bufio.Reader) (io.Reader, error) {
	head, _ := br.Peek(len(magicBzip2))
	switch {
	case bytes.HasPrefix(head, magicGzip):
		return gzip.NewReader(br)
	case bytes.HasPrefix(head, magicBzip2):
		return bzip2.NewReader(br), nil
	}
	return br, nil
}
