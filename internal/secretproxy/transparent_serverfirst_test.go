package secretproxy

import (
	"io"
	"net"
	"testing"
)

// TestTransparentServerFirstClientAnswers: after a server-first
// greeting, what the client then sends still reaches the server (the
// wait for its first bytes does not end the relay).
func TestTransparentServerFirstClientAnswers(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	const hello = "SSH-2.0-test\r\n"
	c := e.transparent(t, 22, echoServer(t, hello))
	line := make([]byte, len(hello))
	if _, err := io.ReadFull(c, line); err != nil || string(line) != hello {
		t.Fatalf("greeting %q, %v", line, err)
	}
	_, _ = io.WriteString(c, "ping\n")
	c.(*net.TCPConn).CloseWrite()
	if b, _ := io.ReadAll(c); string(b) != "ping\n" {
		t.Fatalf("after the greeting the client's bytes came back as %q, want them echoed", b)
	}
}
