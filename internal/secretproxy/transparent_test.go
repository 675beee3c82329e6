package secretproxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// transparent serves one connection as redirected from orig, relaying
// to passTo when not intercepted; it returns the client's end.
func (e *env) transparent(t *testing.T, port uint16, passTo string) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		pass := func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", passTo)
		}
		e.p.ServeTransparent(context.Background(), c, netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), port), pass)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func TestTransparentTLSIntercepted(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	c := tls.Client(e.transparent(t, 443, "127.0.0.1:1"), &tls.Config{ServerName: "api.test", RootCAs: e.ca.pool()})
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: "+s.Placeholder+"\r\nConnection: close\r\n\r\n")
	_, _ = io.ReadAll(c)
	if got := e.only().Header.Get("Authorization"); got != testValue {
		t.Fatalf("Authorization %q, want the value", got)
	}
}

// echoServer accepts one connection, greets it first with hello when
// set, and echoes back what it reads.
func echoServer(t *testing.T, hello string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, hello)
		_, _ = io.Copy(c, c)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func TestTransparentOtherTLSRelayed(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	c := e.transparent(t, 443, echoServer(t, ""))
	// A ClientHello-looking record naming no intercepted host: relayed.
	msg := "\x16\x03\x01\x00\x05hello"
	_, _ = io.WriteString(c, msg)
	c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	if string(b) != msg {
		t.Fatalf("relayed %q, want %q echoed", b, msg)
	}
}

func TestTransparentServerFirstRelayed(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	c := e.transparent(t, 22, echoServer(t, "SSH-2.0-test\r\n"))
	line := make([]byte, len("SSH-2.0-test\r\n"))
	if _, err := io.ReadFull(c, line); err != nil || string(line) != "SSH-2.0-test\r\n" {
		t.Fatalf("a server-first protocol got %q, %v", line, err)
	}
}

func TestTransparentCleartextTLSOnlyRelayedWithEvent(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	c := e.transparent(t, 80, echoServer(t, ""))
	req := "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: " + s.Placeholder + "\r\n\r\n"
	_, _ = io.WriteString(c, req)
	c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	if string(b) != req || strings.Contains(string(b), testValue) {
		t.Fatalf("relayed %q, want the request unchanged", b)
	}
	e.wantEvent("API_KEY", "cleartext")
}

func TestTransparentCleartextAllowHTTPServed(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	s.AllowHTTP = true
	e := startEnv(t, nil, s)
	c := e.transparent(t, 80, "127.0.0.1:1")
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: "+s.Placeholder+"\r\nConnection: close\r\n\r\n")
	_, _ = io.ReadAll(c)
	if got := e.only().Header.Get("Authorization"); got != testValue {
		t.Fatalf("Authorization %q, want the value", got)
	}
}
