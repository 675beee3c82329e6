package server

import (
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// What the toolbox proxy records in the activity trail (activitytrail.go):
// commands (POST /process/execute, and session commands, POST
// /process/session/{id}/exec, run in the background or not) and files
// uploaded (POST /files/upload, /files/upload-v2, /files/bulk-upload).
// Requests and answers stream through unchanged: the proxy reads the
// fields it records as they pass (jsonFields, multipart parts counted,
// not kept), and records the entry once the answer has been sent.

// maxUploadsTrailed bounds the file entries one bulk upload records.
const maxUploadsTrailed = 1000

// trailMargin is how many bytes past maxTrailCommand the proxy keeps of a
// command, so that a credential cut by the limit is still found whole.
const trailMargin = 1024

// trailToolbox returns w wrapped to watch the answer to out, a request
// to the toolbox of sandbox id made by actor (who, in words), and changes out's body to
// be watched too, when out is one the trail records; end, called once
// the request was proxied, records its entry. For any other request it
// returns w itself and an end doing nothing.
func (s *Server) trailToolbox(w http.ResponseWriter, out *http.Request, id string, actor func() string) (http.ResponseWriter, func()) {
	if out.Method != http.MethodPost || s.noTrail {
		return w, func() {}
	}
	path := out.URL.Path
	var session string
	switch {
	case path == "/process/execute":
	case strings.HasPrefix(path, "/process/session/") && strings.HasSuffix(path, "/exec"):
		session = strings.TrimSuffix(strings.TrimPrefix(path, "/process/session/"), "/exec")
		if session == "" || strings.Contains(session, "/") {
			return w, func() {}
		}
	case path == "/files/upload" || path == "/files/upload-v2" || path == "/files/bulk-upload":
		return s.trailUpload(w, out, id, actor())
	default:
		return w, func() {}
	}
	who := actor()
	start := s.now()
	req := newJSONFields(map[string]int{"command": maxTrailCommand + trailMargin, "runAsync": 8, "async": 8})
	body := watchBody(out, req)
	answer := map[string]int{"exitCode": 16} // an execute's; the scan ends once it has them all
	if session != "" {
		answer["cmdId"] = 128
	}
	tw := &trailWriter{ResponseWriter: w, fields: newJSONFields(answer)}
	return tw, func() {
		body.end()
		command, cut, ok := req.text("command")
		if !ok {
			return // not a command: the toolbox refused it
		}
		s.mu.Lock()
		var env map[string]string
		if rec := s.byID[id]; rec != nil {
			env = maps.Clone(rec.env)
		}
		s.mu.Unlock()
		e := activityEntry{Time: start, Kind: activityCommand, Actor: who, Command: redactCommand(command, cut, env), SessionID: session}
		async := req.boolean("runAsync") || req.boolean("async")
		switch {
		case tw.status == 0:
			e.Reason = "the client went away before the answer"
		case tw.status >= http.StatusMultipleChoices:
			e.Reason = fmt.Sprintf("the toolbox answered %d", tw.status)
		case tw.binaryExit != nil:
			e.ExitCode, e.CommandID = tw.binaryExit, tw.binaryCmd
		default:
			if code, ok := tw.fields.integer("exitCode"); ok {
				e.ExitCode = &code
			}
			e.CommandID, _, _ = tw.fields.text("cmdId")
			if async && e.ExitCode == nil {
				e.Reason = reasonBackground // completeBackground asks later
			}
		}
		if !async || tw.status >= http.StatusMultipleChoices {
			e.DurationMs = max(s.now().Sub(start).Milliseconds(), 1)
		}
		s.trail(id, e)
	}
}

// trailUpload is trailToolbox for the upload routes: it counts the bytes
// of each file part (or of a raw body) as they pass.
func (s *Server) trailUpload(w http.ResponseWriter, out *http.Request, id, actor string) (http.ResponseWriter, func()) {
	start := s.now()
	queryPath := out.URL.Query().Get("path")
	bulk := out.URL.Path == "/files/bulk-upload"
	var scan *multipartScan
	var body *watchedBody
	if _, params, err := mime.ParseMediaType(out.Header.Get("Content-Type")); err == nil && params["boundary"] != "" {
		scan = newMultipartScan(params["boundary"], bulk)
		body = watchBody(out, scan)
	} else if !bulk {
		body = watchBody(out, nil) // a raw upload-v2: its bytes are the file's
	} else {
		return w, func() {}
	}
	tw := &trailWriter{ResponseWriter: w}
	return tw, func() {
		n := body.end()
		if tw.status < 200 || tw.status >= http.StatusMultipleChoices {
			return // refused, or cut short: nothing (sure) was written
		}
		var files []activityEntry
		entry := func(p string, n int64) activityEntry {
			return activityEntry{Time: start, Kind: activityFile, Actor: actor, Path: cutPath(p), Bytes: n}
		}
		switch {
		case scan == nil:
			files = append(files, entry(queryPath, n))
		case bulk:
			for _, f := range scan.result() {
				files = append(files, entry(f.path, f.bytes))
			}
		default:
			for _, f := range scan.result() {
				if f.field == "file" {
					files = append(files, entry(queryPath, f.bytes))
					break
				}
			}
		}
		if len(files) > 0 {
			s.trail(id, files...)
		}
	}
}

// cutPath returns p cut at maxTrailPath bytes.
func cutPath(p string) string {
	if len(p) > maxTrailPath {
		return strings.ToValidUTF8(p[:maxTrailPath], "") + "…"
	}
	return p
}

// trailWriter is the ResponseWriter of a toolbox request the trail
// records: it notes the answer's status, the exit code of a binary exec
// answer (toolbox.ExtBinary), and scans a JSON answer with fields.
type trailWriter struct {
	http.ResponseWriter
	status     int
	fields     *jsonFields // nil: the body is not looked at
	binaryExit *int
	binaryCmd  string
}

// WriteHeader notes the answer's status (and a binary exec's exit code).
func (tw *trailWriter) WriteHeader(code int) {
	if tw.status == 0 {
		tw.status = code
		h := tw.Header()
		if v := h.Get(toolbox.HeaderExitCode); v != "" && h.Get("Content-Type") == toolbox.ContentTypeBinary {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				tw.binaryExit, tw.binaryCmd = &n, h.Get(toolbox.HeaderCommandID)
			}
		}
	}
	tw.ResponseWriter.WriteHeader(code)
}

// Write scans p and passes it on unchanged.
func (tw *trailWriter) Write(p []byte) (int, error) {
	if tw.status == 0 {
		tw.WriteHeader(http.StatusOK)
	}
	if tw.fields != nil && tw.binaryExit == nil {
		_, _ = tw.fields.Write(p)
	}
	return tw.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (tw *trailWriter) Flush() { _ = http.NewResponseController(tw.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (tw *trailWriter) Unwrap() http.ResponseWriter { return tw.ResponseWriter }

// watchedBody is a request body that shows the bytes read from it to a
// watcher, and counts them. The transport reads it in a goroutine of its
// own, which may go on after the answer came: end stops the watching.
type watchedBody struct {
	rc io.ReadCloser

	mu    sync.Mutex
	w     io.Writer // nil once ended, or none
	n     int64
	ended bool
}

// watchBody makes out's body a watchedBody showing its bytes to w (which
// may be nil: counted only). A request without a body keeps none (a
// body, even empty, would change how the transport sends it).
func watchBody(out *http.Request, w io.Writer) *watchedBody {
	b := &watchedBody{rc: out.Body, w: w}
	if out.Body == nil || out.Body == http.NoBody {
		b.rc = http.NoBody
		return b
	}
	out.Body = b
	return b
}

// Read reads from the body, showing what it read to the watcher.
func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.mu.Lock()
		if !b.ended {
			b.n += int64(n)
			if b.w != nil {
				_, _ = b.w.Write(p[:n]) // a watcher never fails the request
			}
		}
		b.mu.Unlock()
	}
	return n, err
}

// Close closes the body.
func (b *watchedBody) Close() error { return b.rc.Close() }

// end stops the watching, ends a multipartScan watcher, and returns the
// count of bytes read.
func (b *watchedBody) end() int64 {
	b.mu.Lock()
	b.ended = true
	n := b.n
	w := b.w
	b.mu.Unlock()
	if ms, ok := w.(*multipartScan); ok {
		ms.close()
	}
	return n
}

// multipartScan reads a multipart body written to it (in a goroutine of
// its own, through a pipe) and notes, for each file part, its form name,
// its path (the preceding files[i].path part, for a bulk upload) and its
// size. It keeps no file's bytes.
type multipartScan struct {
	pw   *io.PipeWriter
	done chan struct{}

	bulk  bool
	files []scannedPart
}

// scannedPart is a file part of a multipart body.
type scannedPart struct {
	field, path string
	bytes       int64
}

// newMultipartScan starts the scan of a multipart body of boundary.
func newMultipartScan(boundary string, bulk bool) *multipartScan {
	pr, pw := io.Pipe()
	ms := &multipartScan{pw: pw, done: make(chan struct{}), bulk: bulk}
	go ms.run(pr, boundary)
	return ms
}

// Write hands p to the scan.
func (ms *multipartScan) Write(p []byte) (int, error) { return ms.pw.Write(p) }

// run parses the parts until the body's end; whatever it cannot parse it
// reads on and drops, so that writes never block.
func (ms *multipartScan) run(pr *io.PipeReader, boundary string) {
	defer close(ms.done)
	defer func() { _, _ = io.Copy(io.Discard, pr) }()
	mr := multipart.NewReader(pr, boundary)
	paths := map[string]string{}
	for len(ms.files) < maxUploadsTrailed {
		part, err := mr.NextRawPart()
		if err != nil {
			return
		}
		name := part.FormName()
		key, isBulk := strings.CutPrefix(name, "files[")
		switch {
		case ms.bulk && isBulk && strings.HasSuffix(key, "].path"):
			v, _ := io.ReadAll(io.LimitReader(part, maxTrailPath+1))
			paths[strings.TrimSuffix(key, "].path")] = string(v)
		case ms.bulk && isBulk && strings.HasSuffix(key, "].file"):
			p, ok := paths[strings.TrimSuffix(key, "].file")]
			n, err := io.Copy(io.Discard, part)
			if ok && err == nil {
				ms.files = append(ms.files, scannedPart{field: name, path: p, bytes: n})
			}
		case !ms.bulk && name == "file":
			n, err := io.Copy(io.Discard, part)
			if err == nil {
				ms.files = append(ms.files, scannedPart{field: name, bytes: n})
			}
		}
		part.Close()
	}
}

// close ends the body: the scan reads what is left and ends.
func (ms *multipartScan) close() {
	ms.pw.Close()
	<-ms.done
}

// result returns the file parts scanned; call it after close.
func (ms *multipartScan) result() []scannedPart { return ms.files }
