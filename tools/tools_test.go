//go:build linux

package tools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/tools"
)

type obj = map[string]any

func TestExecute(t *testing.T) {
	s := newSet(t, tools.Config{})
	r := mustCall(t, s, tools.NameExecute, obj{"command": "pwd; echo $X; echo oops >&2; exit 3", "env": obj{"X": "x1"}})
	out := r.Data.(*tools.ExecuteOutput)
	if out.ExitCode != 3 || out.Stdout != "/tmp/w\nx1\n" || out.Stderr != "oops\n" {
		t.Fatalf("output %+v", out)
	}
	for _, want := range []string{"stdout:\n/tmp/w\nx1\n", "stderr:\noops\n", "Exit code: 3"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, r.Text)
		}
	}
	r = mustCall(t, s, tools.NameExecute, obj{"command": "sleep 5", "timeout": 0.2})
	if out := r.Data.(*tools.ExecuteOutput); !out.TimedOut || out.ExitCode != sandbox.ExitTimedOut || !strings.Contains(r.Text, "timed out") {
		t.Fatalf("timeout: %+v %s", out, r.Text)
	}
}

func TestHugeOutputBoundedAndRetrievable(t *testing.T) {
	const limit = 4096
	s := newSet(t, tools.Config{MaxOutputBytes: limit})
	// 200000 numbered lines: about 1.3 MB.
	r := mustCall(t, s, tools.NameExecute, obj{"command": "seq 1 200000"})
	out := r.Data.(*tools.ExecuteOutput)
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if !out.Truncated || out.Handle == "" || out.StdoutBytes != int64(want.Len()) {
		t.Fatalf("not truncated with a handle: %+v", out)
	}
	if len(r.Text) > limit+400 {
		t.Errorf("text has %d bytes, want about %d", len(r.Text), limit)
	}
	marker := fmt.Sprintf("the output has %d bytes", want.Len())
	if !strings.HasPrefix(r.Text, "1\n2\n") || !strings.HasSuffix(r.Text, "199999\n200000\n") || !strings.Contains(r.Text, marker) || !strings.Contains(r.Text, out.Handle) {
		t.Fatalf("no head, tail or marker:\n%s", r.Text)
	}
	var got strings.Builder
	var off int64
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("read_output does not end")
		}
		p := mustCall(t, s, tools.NameReadOutput, obj{"handle": out.Handle, "offset": off}).Data.(*tools.ReadOutputOutput)
		got.WriteString(p.Data)
		off = p.NextOffset
		if p.EOF {
			break
		}
	}
	if got.String() != want.String() {
		t.Fatalf("read_output returned %d bytes, not the output (%d bytes)", got.Len(), want.Len())
	}
	if r := call(t, s, tools.NameReadOutput, obj{"handle": "out-999"}, nil); !errors.Is(r.Err, sandbox.ErrInvalidArgument) {
		t.Errorf("unknown handle: %v", r.Err)
	}
}

func TestBackgroundProcess(t *testing.T) {
	s := newSet(t, tools.Config{})
	r := mustCall(t, s, tools.NameExecute, obj{"command": "echo ready; while read l; do echo got:$l; done; echo bye; exit 7", "background": true})
	pid := r.Data.(*tools.ExecuteOutput).PID
	if pid == "" || !strings.Contains(r.Text, pid) {
		t.Fatalf("no pid: %s", r.Text)
	}
	out := mustCall(t, s, tools.NameProcessOutput, obj{"pid": pid, "cursor": 0, "wait": 10}).Data.(*tools.ProcessOutputOutput)
	if out.Output != "ready\n" || !out.Running || out.NextCursor != 6 {
		t.Fatalf("first read: %+v", out)
	}
	mustCall(t, s, tools.NameProcessStdin, obj{"pid": pid, "data": "a\n"})
	out = mustCall(t, s, tools.NameProcessOutput, obj{"pid": pid, "cursor": out.NextCursor, "wait": 10}).Data.(*tools.ProcessOutputOutput)
	if out.Output != "got:a\n" {
		t.Fatalf("after stdin: %+v (the cursor must skip what was read)", out)
	}
	list := mustCall(t, s, tools.NameProcessList, obj{})
	if !strings.Contains(list.Text, pid+"\trunning") {
		t.Errorf("process_list:\n%s", list.Text)
	}
	mustCall(t, s, tools.NameProcessStdin, obj{"pid": pid, "close": true})
	cursor := out.NextCursor
	var rest strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for {
		out = mustCall(t, s, tools.NameProcessOutput, obj{"pid": pid, "cursor": cursor, "wait": 10}).Data.(*tools.ProcessOutputOutput)
		rest.WriteString(out.Output)
		cursor = out.NextCursor
		if !out.Running || time.Now().After(deadline) {
			break
		}
	}
	if out.Running || out.ExitCode == nil || *out.ExitCode != 7 || rest.String() != "bye\n" {
		t.Fatalf("exit: %+v, rest %q", out, rest.String())
	}

	r = mustCall(t, s, tools.NameExecute, obj{"command": "sleep 300", "background": true})
	pid = r.Data.(*tools.ExecuteOutput).PID
	k := mustCall(t, s, tools.NameProcessKill, obj{"pid": pid})
	if !k.Data.(*tools.ProcessKillOutput).Killed {
		t.Fatalf("kill: %s", k.Text)
	}
	if r := call(t, s, tools.NameProcessOutput, obj{"pid": "999"}, nil); !errors.Is(r.Err, sandbox.ErrNotFound) {
		t.Errorf("unknown pid: %v %s", r.Err, r.Text)
	}
}

func TestFiles(t *testing.T) {
	s := newSet(t, tools.Config{})
	mustCall(t, s, tools.NameWriteFile, obj{"path": "a/b.txt", "content": "one\ntwo\nthree\ntwo\n"})
	r := mustCall(t, s, tools.NameReadFile, obj{"path": "/tmp/w/a/b.txt", "offset": 2, "limit": 2})
	rf := r.Data.(*tools.ReadFileOutput)
	if rf.Content != "two\nthree\n" || rf.StartLine != 2 || rf.EndLine != 3 || rf.TotalLines != 4 || !strings.Contains(r.Text, "read on with offset 4") {
		t.Fatalf("read_file range: %+v\n%s", rf, r.Text)
	}
	// An ambiguous edit is refused and changes nothing.
	r = call(t, s, tools.NameEditFile, obj{"path": "a/b.txt", "old_string": "two", "new_string": "2"}, nil)
	if !errors.Is(r.Err, sandbox.ErrInvalidArgument) || !strings.Contains(r.Text, "occurs 2 times") {
		t.Fatalf("ambiguous edit: %v %s", r.Err, r.Text)
	}
	r = call(t, s, tools.NameEditFile, obj{"path": "a/b.txt", "old_string": "four", "new_string": "4"}, nil)
	if !strings.Contains(r.Text, "not found") {
		t.Fatalf("missing text: %s", r.Text)
	}
	mustCall(t, s, tools.NameEditFile, obj{"path": "a/b.txt", "old_string": "two\nthree", "new_string": "2\n3"})
	mustCall(t, s, tools.NameEditFile, obj{"path": "a/b.txt", "old_string": "one", "new_string": "1", "replace_all": true})
	if got := mustCall(t, s, tools.NameReadFile, obj{"path": "a/b.txt"}).Data.(*tools.ReadFileOutput).Content; got != "1\n2\n3\ntwo\n" {
		t.Fatalf("after edits: %q", got)
	}
	if r := mustCall(t, s, tools.NameListFiles, obj{"path": "a"}); !strings.Contains(r.Text, "b.txt\t10 bytes") {
		t.Errorf("list_files:\n%s", r.Text)
	}
	if r := mustCall(t, s, tools.NameFindFiles, obj{"text": "two"}); !strings.Contains(r.Text, "/tmp/w/a/b.txt:4: two") {
		t.Errorf("find_files text:\n%s", r.Text)
	}
	if r := mustCall(t, s, tools.NameFindFiles, obj{"name": "*.txt"}); !strings.Contains(r.Text, "b.txt") {
		t.Errorf("find_files name:\n%s", r.Text)
	}
	mustCall(t, s, tools.NameDeleteFile, obj{"path": "a", "recursive": true})
	if r := call(t, s, tools.NameReadFile, obj{"path": "a/b.txt"}, nil); !errors.Is(r.Err, sandbox.ErrNotFound) {
		t.Errorf("read after delete: %v", r.Err)
	}
}

func TestBadInputIsAToolError(t *testing.T) {
	s := newSet(t, tools.Config{})
	for _, c := range []struct {
		name string
		args string
	}{
		{tools.NameExecute, `{}`},
		{tools.NameExecute, `{"command": 42}`},
		{tools.NameExecute, `{"command": "true", "timeout": -1}`},
		{tools.NameExecute, `{"command": "true", "bogus": 1}`},
		{tools.NameExecute, `[1]`},
		{tools.NameExecute, `{not json`},
		{tools.NameReadFile, `{"path": ""}`},
		{tools.NameFindFiles, `{}`},
		{"no_such_tool", `{}`},
	} {
		r := s.Call(context.Background(), c.name, []byte(c.args), nil)
		if !errors.Is(r.Err, sandbox.ErrInvalidArgument) || !strings.HasPrefix(r.Text, "Error: ") {
			t.Errorf("%s %s: %v %q, want an invalid-argument tool error", c.name, c.args, r.Err, r.Text)
		}
	}
}

func TestApprovalGate(t *testing.T) {
	var mu sync.Mutex
	var seen []tools.Action
	s := newSet(t, tools.Config{Approve: func(_ context.Context, a tools.Action) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, a)
		if strings.Contains(a.Command, "rm ") || strings.HasSuffix(a.Path, ".secret") {
			return errors.New("policy forbids it")
		}
		return nil
	}})
	r := call(t, s, tools.NameExecute, obj{"command": "rm -rf /tmp/w; touch /tmp/ran"}, nil)
	if !errors.Is(r.Err, tools.ErrRefused) || !strings.Contains(r.Text, "policy forbids it") {
		t.Fatalf("refused command: %v %s", r.Err, r.Text)
	}
	if r := mustCall(t, s, tools.NameExecute, obj{"command": "test -e /tmp/ran && echo ran || echo no"}); r.Data.(*tools.ExecuteOutput).Stdout != "no\n" {
		t.Fatal("the refused command ran")
	}
	r = call(t, s, tools.NameWriteFile, obj{"path": "k.secret", "content": "x"}, nil)
	if !errors.Is(r.Err, tools.ErrRefused) {
		t.Fatalf("refused write: %v %s", r.Err, r.Text)
	}
	// The call's gate runs too.
	r = call(t, s, tools.NameWriteFile, obj{"path": "ok.txt", "content": "x"}, &tools.CallOptions{Approve: func(context.Context, tools.Action) error { return errors.New("the user said no") }})
	if !errors.Is(r.Err, tools.ErrRefused) || !strings.Contains(r.Text, "the user said no") {
		t.Fatalf("call gate: %v %s", r.Err, r.Text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3 || seen[0].Kind != tools.ActionCommand || seen[2].Kind != tools.ActionWrite || seen[2].Path != "/tmp/w/k.secret" {
		t.Errorf("actions seen: %+v", seen)
	}
}

func TestProgress(t *testing.T) {
	s := newSet(t, tools.Config{ProgressInterval: 20 * time.Millisecond})
	var mu sync.Mutex
	var got []tools.Progress
	// The command waits until it has seen a progress report, so the test
	// does not depend on timing.
	r := call(t, s, tools.NameExecute, obj{"command": "echo step1; for i in $(seq 1 500); do test -e /tmp/seen && exit 0; sleep 0.02; done; exit 1"}, &tools.CallOptions{Progress: func(p tools.Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
		if p.LastLine == "step1" {
			_ = s.Workspace().WriteFile(context.Background(), "/tmp/seen", nil)
		}
	}})
	if r.IsError() || r.Data.(*tools.ExecuteOutput).ExitCode != 0 {
		t.Fatalf("no progress with the last line reached the command: %s", r.Text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[len(got)-1].Bytes != 6 {
		t.Fatalf("progress: %+v", got)
	}
}
