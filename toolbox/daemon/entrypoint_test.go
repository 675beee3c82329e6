package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestEntrypoint(t *testing.T) {
	e := newEnv(t, true, func(o *Options) {
		o.Entrypoint = []string{"sh", "-c", "echo out; echo err >&2; echo done"}
	})
	var sess toolbox.Session
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := json.Unmarshal(e.expect(http.StatusOK, "GET", "/process/session/entrypoint", nil), &sess); err != nil {
			t.Fatal(err)
		}
		if len(sess.Commands) != 1 {
			t.Fatalf("entrypoint session %+v, want one command", sess)
		}
		if sess.Commands[0].ExitCode != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := sess.Commands[0]
	if sess.SessionID != "entrypoint" || c.ID != "entrypoint_command" || c.Command != "sh -c 'echo out; echo err >&2; echo done'" ||
		c.ExitCode == nil || *c.ExitCode != 0 {
		t.Fatalf("entrypoint session %+v, command %+v", sess, c)
	}
	var logs toolbox.SessionCommandLogsResponse
	if err := json.Unmarshal(e.expect(http.StatusOK, "GET", "/process/session/entrypoint/logs", nil, sdk...), &logs); err != nil {
		t.Fatal(err)
	}
	if logs.Stdout != "out\ndone\n" || logs.Stderr != "err\n" {
		t.Errorf("logs %+v", logs)
	}
	// Plain text: both streams merged (stderr's line may come anywhere:
	// the streams are read apart).
	plain := string(e.expect(http.StatusOK, "GET", "/process/session/entrypoint/logs", nil))
	if strings.Replace(plain, "err\n", "", 1) != "out\ndone\n" {
		t.Errorf("plain logs %q", plain)
	}
	// Following the logs of an ended entrypoint sends them and closes.
	conn, _, err := websocket.Dial(t.Context(), "ws://sandbox/process/session/entrypoint/logs?follow=true",
		&websocket.DialOptions{HTTPClient: e.client, HTTPHeader: http.Header{toolbox.HeaderUseExtensions: {toolbox.ExtFrames}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	msgs, ce := readAll(t.Context(), t, conn)
	var out []byte
	for _, m := range msgs {
		if m[0] == 1 {
			out = append(out, m[1:]...)
		}
	}
	if string(out) != "out\ndone\n" || ce.Code != websocket.StatusNormalClosure || ce.Reason != "exit=0" {
		t.Errorf("follow: stdout %q, close %v", out, ce)
	}
	// The entrypoint is apart from the client's sessions.
	var list []toolbox.Session
	if err := json.Unmarshal(e.expect(http.StatusOK, "GET", "/process/session", nil), &list); err != nil || len(list) != 0 {
		t.Errorf("sessions %+v %v", list, err)
	}
}

func TestEntrypointNone(t *testing.T) {
	e := newEnv(t, true)
	e.expectError(http.StatusNotFound, codeNotFound, "GET", "/process/session/entrypoint", nil)
	e.expectError(http.StatusNotFound, codeNotFound, "GET", "/process/session/entrypoint/logs", nil)
}
