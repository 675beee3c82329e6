package daemon

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// interpreterWorker is the Python program of an interpreter context.
//
//go:embed interpreter_worker.py
var interpreterWorker string

// interpReadChunk is how much output one read takes; a message carries at
// most that much text (JSON escapes can make it up to 6 times larger).
const interpReadChunk = 8 << 10

// worker is the Python process of one interpreter context and the
// goroutines reading it. Its output and events arrive on chunks and
// events; both are closed when the process's pipes reach end of file.
type worker struct {
	cmd      *exec.Cmd
	token    string   // markerKey value of its processes
	requests *os.File // its fd 3
	sentinel []byte
	chunks   chan outChunk
	events   chan toolbox.InterpreterMessage
	gone     chan struct{} // closed by stop: nobody reads any more
	stopOnce sync.Once
	exited   chan struct{} // closed when the process was reaped
	status   int           // exit status, valid after exited
}

// outChunk is output of one stream (1 stdout, 2 stderr); end marks the end
// of an execution's output on that stream (the sentinel), eof the end of
// the stream.
type outChunk struct {
	stream   int
	data     []byte
	end, eof bool
}

// startWorker starts a context's Python process in cwd.
func (s *Server) startWorker(python, script, cwd string) (*worker, error) {
	w := &worker{
		token:    "interp-" + randomHex(8),
		sentinel: []byte("\x00agentbox-end-" + randomHex(16) + "\x00"),
		chunks:   make(chan outChunk, 16),
		events:   make(chan toolbox.InterpreterMessage, 16),
		gone:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	// Four pipes: its stdout, stderr, requests (fd 3) and events (fd 4).
	var p [4][2]*os.File // read end, write end
	for i := range p {
		r, wr, err := os.Pipe()
		if err != nil {
			for _, pair := range p[:i] {
				closeFiles(pair[:]...)
			}
			return nil, fmt.Errorf("interpreter: %w", err)
		}
		p[i] = [2]*os.File{r, wr}
	}
	outR, outW, errR, errW := p[0][0], p[0][1], p[1][0], p[1][1]
	reqR, reqW, evR, evW := p[2][0], p[2][1], p[3][0], p[3][1]
	// Its ends are closed here once it has them (or failed to start).
	defer closeFiles(outW, errW, reqR, evW)
	growPipe(outW)
	growPipe(errW)
	w.cmd = &exec.Cmd{
		Path:        python,
		Args:        []string{"python3", "-u", script},
		Env:         append(withoutKeys(s.environ(), markerKey), markerKey+"="+w.token),
		Dir:         cwd,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{reqR, evW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := s.startCommand(w.cmd); err != nil {
		closeFiles(outR, errR, reqW, evR)
		return nil, fmt.Errorf("interpreter: starting %s: %w", python, err)
	}
	w.requests = reqW
	init, _ := json.Marshal(map[string]string{"sentinel": string(w.sentinel)})
	// The pipe holds the first line whatever the worker does.
	_, _ = reqW.Write(append(init, '\n'))
	s.bg.Go(func() { w.pump(1, outR) })
	s.bg.Go(func() { w.pump(2, errR) })
	s.bg.Go(func() { w.readEvents(evR) })
	s.bg.Go(func() {
		err := w.cmd.Wait()
		w.status = exitCode(w.cmd, err)
		close(w.exited)
	})
	return w, nil
}

// send writes an execution request to the worker.
func (w *worker) send(req any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, err = w.requests.Write(append(b, '\n'))
	return err
}

// interrupt sends SIGINT to the worker: KeyboardInterrupt in running code.
func (w *worker) interrupt() { _ = w.cmd.Process.Signal(syscall.SIGINT) }

// stop kills the worker and every process it started, and lets its
// goroutines end.
func (w *worker) stop() {
	w.stopOnce.Do(func() {
		close(w.gone)
		w.requests.Close()
		killTree([]int{w.cmd.Process.Pid}, w.token)
	})
	<-w.exited
}

// deliver passes c to the execution, or drops it once the worker stopped.
func (w *worker) deliver(c outChunk) {
	select {
	case w.chunks <- c:
	case <-w.gone:
	}
}

// pump reads one output stream, cutting it at each sentinel.
func (w *worker) pump(stream int, f *os.File) {
	defer f.Close()
	buf := make([]byte, interpReadChunk)
	var held []byte // a possible start of the sentinel
	for {
		n, err := f.Read(buf)
		data := append(held, buf[:n]...)
		held = nil
		for {
			i := bytes.Index(data, w.sentinel)
			if i < 0 {
				break
			}
			if i > 0 {
				w.deliver(outChunk{stream: stream, data: data[:i]})
			}
			w.deliver(outChunk{stream: stream, end: true})
			data = data[i+len(w.sentinel):]
		}
		if err != nil {
			if len(data) > 0 {
				w.deliver(outChunk{stream: stream, data: data})
			}
			w.deliver(outChunk{stream: stream, eof: true})
			return
		}
		k := partialSuffix(data, w.sentinel)
		if len(data) > k {
			w.deliver(outChunk{stream: stream, data: data[:len(data)-k]})
		}
		if k > 0 {
			held = append([]byte(nil), data[len(data)-k:]...)
		}
	}
}

// readEvents reads the worker's event lines until end of file, then
// closes events.
func (w *worker) readEvents(f *os.File) {
	defer f.Close()
	defer close(w.events)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m toolbox.InterpreterMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		select {
		case w.events <- m:
		case <-w.gone:
			return
		}
	}
}
