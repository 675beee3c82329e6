package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/workspace"
)

// ReadFileInput is the input of read_file.
type ReadFileInput struct {
	Path string `json:"path"`
	// Offset is the first line to read, from 1 (the default).
	Offset int `json:"offset,omitempty"`
	// Limit is how many lines to read at most (DefaultReadFileLines).
	Limit int `json:"limit,omitempty"`
}

// ReadFileOutput is a range of lines of a text file.
type ReadFileOutput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// StartLine and EndLine are the lines of Content (from 1; EndLine <
	// StartLine when Content is empty); TotalLines the file's.
	StartLine  int `json:"startLine"`
	EndLine    int `json:"endLine"`
	TotalLines int `json:"totalLines"`
	// Truncated reports lines left out because Content reached
	// Config.MaxOutputBytes.
	Truncated bool `json:"truncated,omitempty"`
	// Partial reports a file larger than Config.MaxReadFileBytes: only
	// that much of it was read, so TotalLines counts the lines there (a
	// lower bound) and lines past it are not found.
	Partial bool `json:"partial,omitempty"`
	// ReadBytes is Config.MaxReadFileBytes when Partial.
	ReadBytes int64 `json:"readBytes,omitempty"`
}

// ReadFile returns a range of lines of a text file (read_file).
func (s *Set) ReadFile(ctx context.Context, in ReadFileInput, _ *CallOptions) (*ReadFileOutput, error) {
	if in.Offset < 0 || in.Limit < 0 {
		return nil, invalid("offset and limit must not be negative")
	}
	start, limit := max(in.Offset, 1), in.Limit
	if limit == 0 {
		limit = DefaultReadFileLines
	}
	abs, err := s.ws.Resolve(ctx, in.Path)
	if err != nil {
		return nil, err
	}
	rc, err := s.ws.OpenFile(ctx, abs)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	out := &ReadFileOutput{Path: abs, StartLine: start, EndLine: start - 1}
	// The file's size is the sandbox's to decide: read at most the limit
	// and a byte, which tells a larger file.
	scan := s.cfg.MaxReadFileBytes
	lr := &io.LimitedReader{R: rc, N: scan + 1}
	r := bufio.NewReaderSize(lr, 64<<10)
	if head, _ := r.Peek(8 << 10); bytes.IndexByte(head, 0) >= 0 {
		return nil, invalid("%s is a binary file; read it with execute_command (e.g. xxd or base64)", abs)
	}
	var content bytes.Buffer
	line, atStart, lineStart := 0, true, 0
	for {
		b, err := r.ReadSlice('\n')
		if len(b) > 0 {
			if atStart {
				line++
				lineStart = content.Len()
			}
			atStart = b[len(b)-1] == '\n'
			if line >= start && line < start+limit && !out.Truncated {
				if content.Len()+len(b) > s.cfg.MaxOutputBytes {
					out.Truncated = true
					content.Truncate(lineStart) // whole lines only
				} else {
					content.Write(b)
					out.EndLine = line
				}
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", abs, err)
		}
	}
	if out.Truncated {
		out.EndLine = out.StartLine - 1 + bytes.Count(content.Bytes(), []byte{'\n'})
	}
	if lr.N == 0 {
		out.Partial, out.ReadBytes = true, scan
	}
	out.Content, out.TotalLines = content.String(), line
	return out, nil
}

func renderReadFile(o *ReadFileOutput) string {
	if o.Partial {
		return renderPartial(o)
	}
	if o.TotalLines == 0 {
		return fmt.Sprintf("(%s is empty)", o.Path)
	}
	if o.EndLine < o.StartLine {
		return fmt.Sprintf("(%s has %d lines: none from line %d)", o.Path, o.TotalLines, o.StartLine)
	}
	s := o.Content
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	s += fmt.Sprintf("[%s: lines %d-%d of %d", o.Path, o.StartLine, o.EndLine, o.TotalLines)
	if o.EndLine < o.TotalLines {
		s += fmt.Sprintf("; read on with offset %d", o.EndLine+1)
	}
	return s + "]"
}

// renderPartial renders a read of a file larger than read_file reads.
func renderPartial(o *ReadFileOutput) string {
	note := fmt.Sprintf("%s is larger than the %s read_file reads; they hold %d lines", o.Path, toolbox.FormatSize(o.ReadBytes), o.TotalLines)
	if o.EndLine < o.StartLine {
		return fmt.Sprintf("(%s: none from line %d. Read further with execute_command, e.g. sed -n '%d,%dp' %s)", note, o.StartLine, o.StartLine, o.StartLine+99, o.Path)
	}
	s := o.Content
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s + fmt.Sprintf("[%s: lines %d-%d; %s. Read on with offset %d, or with execute_command past them]", o.Path, o.StartLine, o.EndLine, note, o.EndLine+1)
}

// WriteFileInput is the input of write_file.
type WriteFileInput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// WriteFileOutput is the output of write_file and edit_file.
type WriteFileOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
	// Replacements counts the replacements of edit_file.
	Replacements int `json:"replacements,omitempty"`
}

// WriteFile writes a file, creating its folders (write_file).
func (s *Set) WriteFile(ctx context.Context, in WriteFileInput, o *CallOptions) (*WriteFileOutput, error) {
	abs, err := s.ws.Resolve(ctx, in.Path)
	if err != nil {
		return nil, err
	}
	if err := s.approve(ctx, o, Action{Tool: "write_file", Kind: ActionWrite, Path: abs}); err != nil {
		return nil, err
	}
	if err := s.ws.WriteFile(ctx, abs, []byte(in.Content)); err != nil {
		return nil, err
	}
	return &WriteFileOutput{Path: abs, Bytes: len(in.Content)}, nil
}

func renderWriteFile(o *WriteFileOutput) string {
	if o.Replacements > 0 {
		return fmt.Sprintf("Edited %s: %d replacement(s); it now has %d bytes.", o.Path, o.Replacements, o.Bytes)
	}
	return fmt.Sprintf("Wrote %d bytes to %s.", o.Bytes, o.Path)
}

// EditFileInput is the input of edit_file.
type EditFileInput struct {
	Path string `json:"path"`
	// OldString is the exact text to replace; it must occur once unless
	// ReplaceAll.
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
	// ReplaceAll replaces every occurrence.
	ReplaceAll bool `json:"replace_all,omitempty"`
}

// EditFile replaces exact text in a file (edit_file). It refuses an
// OldString that does not occur, or that occurs more than once without
// ReplaceAll.
func (s *Set) EditFile(ctx context.Context, in EditFileInput, o *CallOptions) (*WriteFileOutput, error) {
	if in.OldString == "" {
		return nil, invalid("old_string is empty: give the exact text to replace (use write_file to create a file)")
	}
	if in.OldString == in.NewString {
		return nil, invalid("old_string and new_string are the same: nothing would change")
	}
	abs, err := s.ws.Resolve(ctx, in.Path)
	if err != nil {
		return nil, err
	}
	data, err := s.ws.ReadFileLimit(ctx, abs, s.cfg.MaxEditFileBytes)
	var tl *workspace.FileTooLargeError
	if errors.As(err, &tl) {
		return nil, editTooLarge(tl)
	}
	if err != nil {
		return nil, err
	}
	text := string(data)
	n := strings.Count(text, in.OldString)
	switch {
	case n == 0:
		return nil, invalid("old_string was not found in %s: it must match the file exactly, whitespace and indentation included (read the file first)", abs)
	case n > 1 && !in.ReplaceAll:
		return nil, invalid("old_string occurs %d times in %s: add surrounding lines to make it unique, or set replace_all to replace every occurrence", n, abs)
	}
	if err := s.approve(ctx, o, Action{Tool: "edit_file", Kind: ActionWrite, Path: abs}); err != nil {
		return nil, err
	}
	text = strings.Replace(text, in.OldString, in.NewString, n)
	if err := s.ws.WriteFile(ctx, abs, []byte(text)); err != nil {
		return nil, err
	}
	return &WriteFileOutput{Path: abs, Bytes: len(text), Replacements: n}, nil
}

// editTooLarge is edit_file's error for a file past its limit. It
// matches sandbox.ErrInvalidArgument and workspace.ErrTooLarge.
func editTooLarge(e *workspace.FileTooLargeError) error {
	size := "grew past it while it was read"
	if e.Size >= 0 {
		size = fmt.Sprintf("has %s (%d bytes)", toolbox.FormatSize(e.Size), e.Size)
	}
	return invalid("%s %s: edit_file changes files of at most %s; change this one with execute_command (e.g. sed -i or a script)%w",
		e.Path, size, toolbox.FormatSize(e.Limit), silent{workspace.ErrTooLarge})
}

// silent wraps an error without adding to the message.
type silent struct{ err error }

func (silent) Error() string   { return "" }
func (s silent) Unwrap() error { return s.err }

// ListFilesInput is the input of list_files.
type ListFilesInput struct {
	// Path is the folder to list; "" is the working directory.
	Path string `json:"path,omitempty"`
}

// ListFilesOutput is a folder's entries.
type ListFilesOutput struct {
	Path    string               `json:"path"`
	Entries []workspace.FileInfo `json:"entries"`
	// Truncated reports entries left out (more than 1000).
	Truncated bool `json:"truncated,omitempty"`
}

// ListFiles lists a folder (list_files).
func (s *Set) ListFiles(ctx context.Context, in ListFilesInput, _ *CallOptions) (*ListFilesOutput, error) {
	abs, err := s.ws.Resolve(ctx, orDot(in.Path))
	if err != nil {
		return nil, err
	}
	list, err := s.ws.ReadDir(ctx, abs)
	if errors.Is(err, toolbox.ErrTooLarge) {
		return nil, invalid("%s has more entries than the host reads (a listing of at most %s): list part of it with execute_command (e.g. ls | head -n 1000)%w", abs, toolbox.FormatSize(toolbox.MaxJSONBytes), silent{err})
	}
	if err != nil {
		return nil, err
	}
	out := &ListFilesOutput{Path: abs, Entries: list}
	if len(list) > maxListEntries {
		out.Entries, out.Truncated = list[:maxListEntries], true
	}
	if out.Entries == nil {
		out.Entries = []workspace.FileInfo{}
	}
	return out, nil
}

func renderListFiles(o *ListFilesOutput) string {
	if len(o.Entries) == 0 {
		return fmt.Sprintf("%s is empty.", o.Path)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", o.Path)
	for _, e := range o.Entries {
		if e.IsDir {
			fmt.Fprintf(&b, "%s/\n", e.Name)
		} else {
			fmt.Fprintf(&b, "%s\t%d bytes\n", e.Name, e.Size)
		}
	}
	if o.Truncated {
		fmt.Fprintf(&b, "[only the first %d entries are shown]\n", maxListEntries)
	}
	return b.String()
}

// FindFilesInput is the input of find_files: Text finds lines that hold
// it, Name finds files whose name or path matches a glob.
type FindFilesInput struct {
	// Path is the folder to search; "" is the working directory.
	Path string `json:"path,omitempty"`
	Text string `json:"text,omitempty"`
	Name string `json:"name,omitempty"`
}

// FindFilesOutput is what find_files found.
type FindFilesOutput struct {
	Path    string            `json:"path"`
	Matches []workspace.Match `json:"matches,omitempty"`
	Files   []string          `json:"files,omitempty"`
	// Truncated reports results left out (more than 500).
	Truncated bool `json:"truncated,omitempty"`
}

// FindFiles finds lines holding a text, or files by a glob (find_files).
func (s *Set) FindFiles(ctx context.Context, in FindFilesInput, _ *CallOptions) (*FindFilesOutput, error) {
	if (in.Text == "") == (in.Name == "") {
		return nil, invalid("give either text (lines holding it) or name (a glob such as \"*.go\"), not both nor neither")
	}
	abs, err := s.ws.Resolve(ctx, orDot(in.Path))
	if err != nil {
		return nil, err
	}
	out := &FindFilesOutput{Path: abs}
	if in.Text != "" {
		if out.Matches, err = s.ws.Find(ctx, abs, in.Text); err != nil {
			return nil, tooManyFound(abs, err)
		}
		if len(out.Matches) > maxFindMatches {
			out.Matches, out.Truncated = out.Matches[:maxFindMatches], true
		}
		return out, nil
	}
	if out.Files, err = s.ws.Glob(ctx, abs, in.Name); err != nil {
		return nil, tooManyFound(abs, err)
	}
	if len(out.Files) > maxFindMatches {
		out.Files, out.Truncated = out.Files[:maxFindMatches], true
	}
	return out, nil
}

// tooManyFound is find_files' error: for results larger than the toolbox
// client reads (toolbox.MaxJSONBytes), one that says to narrow the search.
func tooManyFound(dir string, err error) error {
	if !errors.Is(err, toolbox.ErrTooLarge) {
		return err
	}
	return invalid("the search in %s found more than the host reads (results of at most %s): narrow it (a folder deeper down, a longer text, a more precise name)%w", dir, toolbox.FormatSize(toolbox.MaxJSONBytes), silent{err})
}

// maxMatchLine bounds a matching line shown to a model.
const maxMatchLine = 300

func renderFindFiles(o *FindFilesOutput) string {
	var b strings.Builder
	for _, m := range o.Matches {
		line := m.Content
		if len(line) > maxMatchLine {
			line = strings.ToValidUTF8(line[:maxMatchLine], "") + "…"
		}
		fmt.Fprintf(&b, "%s:%d: %s\n", m.File, m.Line, line)
	}
	for _, f := range o.Files {
		fmt.Fprintf(&b, "%s\n", f)
	}
	if b.Len() == 0 {
		return fmt.Sprintf("Nothing found in %s.", o.Path)
	}
	if o.Truncated {
		fmt.Fprintf(&b, "[only the first %d results are shown: narrow the search]\n", maxFindMatches)
	}
	return b.String()
}

// DeleteFileInput is the input of delete_file.
type DeleteFileInput struct {
	Path string `json:"path"`
	// Recursive deletes a folder and everything in it.
	Recursive bool `json:"recursive,omitempty"`
}

// DeleteFileOutput is the output of delete_file.
type DeleteFileOutput struct {
	Path string `json:"path"`
}

// DeleteFile deletes a file, or a folder tree with Recursive
// (delete_file).
func (s *Set) DeleteFile(ctx context.Context, in DeleteFileInput, o *CallOptions) (*DeleteFileOutput, error) {
	abs, err := s.ws.Resolve(ctx, in.Path)
	if err != nil {
		return nil, err
	}
	if err := s.approve(ctx, o, Action{Tool: "delete_file", Kind: ActionDelete, Path: abs}); err != nil {
		return nil, err
	}
	if err := s.ws.Remove(ctx, abs, in.Recursive); err != nil {
		return nil, err
	}
	return &DeleteFileOutput{Path: abs}, nil
}

func renderDeleteFile(o *DeleteFileOutput) string { return fmt.Sprintf("Deleted %s.", o.Path) }

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}
