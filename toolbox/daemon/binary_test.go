package daemon

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// binaryAnswer is a parsed binary exec answer.
type binaryAnswer struct {
	cid                          string
	code                         int
	stdout, stderr               string
	stdoutDropped, stderrDropped int64
}

// execBinary runs a sync session command with the binary extension (and
// the extensions in use), checking the answer's framing.
func (e *testEnv) execBinary(sid, command string, hdr ...string) binaryAnswer {
	e.t.Helper()
	use := "binary"
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == toolbox.HeaderUseExtensions {
			use += "," + hdr[i+1]
			hdr = append(hdr[:i:i], hdr[i+2:]...)
			break
		}
	}
	resp, data := e.do("POST", "/process/session/"+sid+"/exec", toolbox.SessionExecuteRequest{Command: command},
		append([]string{toolbox.HeaderUseExtensions, use, toolbox.HeaderSDKVersion, toolbox.SDKVersion}, hdr...)...)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != toolbox.ContentTypeBinary {
		e.t.Fatalf("exec %q: status %d, Content-Type %q: %s", command, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	num := func(name string) int64 {
		n, err := strconv.ParseInt(resp.Header.Get(name), 10, 64)
		if err != nil {
			e.t.Fatalf("exec %q: %s: %v", command, name, err)
		}
		return n
	}
	a := binaryAnswer{cid: resp.Header.Get(toolbox.HeaderCommandID), code: int(num(toolbox.HeaderExitCode))}
	no, ne := num(toolbox.HeaderStdoutBytes), num(toolbox.HeaderStderrBytes)
	if int64(len(data)) != no+ne || resp.ContentLength != no+ne {
		e.t.Fatalf("exec %q: body %d bytes (Content-Length %d), headers say %d + %d", command, len(data), resp.ContentLength, no, ne)
	}
	a.stdout, a.stderr = string(data[:no]), string(data[no:])
	a.stdoutDropped, a.stderrDropped = num(toolbox.HeaderStdoutDropped), num(toolbox.HeaderStderrDropped)
	return a
}

// With the binary extension a sync exec's output crosses the connection
// once and raw: exit code and counts in headers, stdout then stderr in the
// body, any bytes (the traffic is validated: spectest allows the answer
// for opted-in requests only).
func TestBinaryExec(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("b")
	a := e.execBinary("b", `printf 'out\000\377\n'; printf 'err é' >&2; printf more; exit 3`)
	if a.code != 3 || a.stdout != "out\x00\xff\nmore" || a.stderr != "err é" || a.stdoutDropped != 0 || a.stderrDropped != 0 || a.cid == "" {
		t.Fatalf("answer %+v", a)
	}
	if c := e.command("b", a.cid); c.ExitCode == nil || *c.ExitCode != 3 {
		t.Fatalf("command %+v", c)
	}
	// Only the last n bytes of each stream with X-Agentbox-Tail.
	a = e.execBinary("b", `printf 0123456789; printf abc >&2`, toolbox.HeaderTail, "4")
	if a.stdout != "6789" || a.stdoutDropped != 6 || a.stderr != "abc" || a.stderrDropped != 0 || a.code != 0 {
		t.Fatalf("tail answer %+v", a)
	}
	// No output at all.
	if a = e.execBinary("b", "true"); a.stdout != "" || a.stderr != "" || a.code != 0 {
		t.Fatalf("empty answer %+v", a)
	}
	// Without the extension the same server answers Daytona's JSON.
	if r := e.execSync("b", "printf hi"); r.Stdout == nil || *r.Stdout != "hi" {
		t.Fatalf("JSON answer %+v", r)
	}
	// An async exec is unchanged.
	e.expect(http.StatusAccepted, "POST", "/process/session/b/exec", toolbox.SessionExecuteRequest{Command: "true", RunAsync: true},
		toolbox.HeaderUseExtensions, "binary")
}

func TestBinaryExecBadTail(t *testing.T) {
	e := newErrEnv(t)
	e.createSession("b")
	for _, v := range []string{"0", "-1", "x", "1.5"} {
		e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/session/b/exec", toolbox.SessionExecuteRequest{Command: "true"},
			toolbox.HeaderUseExtensions, "binary", toolbox.HeaderTail, v)
	}
}

// A stateless command's log is dropped once its binary answer was sent.
func TestBinaryExecStatelessDrop(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("b")
	a := e.execBinary("b", "head -c 3000000 /dev/zero; echo done >&2", toolbox.HeaderUseExtensions, "stateless")
	if len(a.stdout) != 3000000 || a.stderr != "done\n" {
		t.Fatalf("answer: %d bytes of stdout, stderr %q", len(a.stdout), a.stderr)
	}
	spill := e.spillPath("b", a.cid)
	eventually(t, "the log to be dropped", func() bool { return !exists(spill) })
	if data := e.expect(200, "GET", "/process/session/b/command/"+a.cid+"/logs", nil); len(data) != 0 {
		t.Fatalf("log after the drop: %d bytes", len(data))
	}
}

// The server sends a binary answer from the command's log through a fixed
// buffer: what it allocates does not grow with the output (it built the
// whole answer in memory, the output three times over, JSON and base64).
func TestBinaryExecMemoryBounded(t *testing.T) {
	e := newEnv(t, false)
	e.createSession("m")
	const n = 64 << 20
	cmd := fmt.Sprintf("head -c %d /dev/zero; head -c %d /dev/zero >&2", n/2, n/2)
	// Run it once to warm the pools, then measure a second run, read
	// through a small buffer so that the client allocates nothing big.
	for i := range 2 {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		req, err := http.NewRequest("POST", baseURL+"/process/session/m/exec", strings.NewReader(`{"command":"`+cmd+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(toolbox.HeaderUseExtensions, "binary")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 32<<10))
		resp.Body.Close()
		if err != nil || got != n {
			t.Fatalf("read %d bytes, %v; want %d", got, err, n)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		t.Logf("run %d: %d KiB allocated", i, (after.TotalAlloc-before.TotalAlloc)>>10)
		if alloc := after.TotalAlloc - before.TotalAlloc; i == 1 && alloc > 8<<20 {
			t.Errorf("a %d MiB answer allocated %d MiB (client and server together)", n>>20, alloc>>20)
		}
	}
}

// Bytes that only look like a record boundary inside the log are output:
// the answer is the streams exactly, records of both interleaved.
func TestBinaryExecInterleaved(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("i")
	var wantOut, wantErr bytes.Buffer
	var script strings.Builder
	for i := range 200 {
		fmt.Fprintf(&script, "printf 'o%d\\001\\002\\000'; printf 'e%d\\002' >&2; ", i, i)
		fmt.Fprintf(&wantOut, "o%d\x01\x02\x00", i)
		fmt.Fprintf(&wantErr, "e%d\x02", i)
	}
	a := e.execBinary("i", script.String(), toolbox.HeaderTail, strconv.Itoa(wantOut.Len()-5))
	if a.stdout != wantOut.String()[5:] || a.stdoutDropped != 5 || a.stderr != wantErr.String() {
		t.Fatalf("stdout %q (dropped %d), stderr %q", a.stdout, a.stdoutDropped, a.stderr)
	}
}
