package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// A client without a key cannot hold a connection by trickling a body:
// the server answers 401 and closes the connection, without waiting for
// the rest of the body (it would discard it first, with no deadline).
func TestUnauthenticatedSlowBodyClosed(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	srv := httptest.NewServer(h.s) // not the spec-checking one: it reads bodies
	t.Cleanup(srv.Close)
	for _, c := range []struct{ path, auth string }{
		{"/api/sandbox", ""},
		{"/api/sandbox", "Bearer wrong"},
		{"/api/snapshots", ""},
		{"/toolbox/some-id/files/upload", ""},
	} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		hdr := "POST " + c.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
		if c.auth != "" {
			hdr += "Authorization: " + c.auth + "\r\n"
		}
		if _, err := io.WriteString(conn, hdr+"\r\n{"); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		trickled := make(chan struct{})
		// Before srv.Close (cleanups run last first), which would wait
		// for a connection the server still reads.
		t.Cleanup(func() {
			select {
			case <-stop:
			default:
				close(stop)
			}
			conn.Close()
			<-trickled
		})
		go func() { // a byte every 20 ms, never the whole body
			defer close(trickled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		// Generous: the server closes at once; a server waiting for the
		// body would hold the connection for good.
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("POST %s without a valid key: reading the answer: %v", c.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("POST %s without a valid key: %d, want 401", c.path, resp.StatusCode)
		}
		_, err = br.ReadByte()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("POST %s without a valid key, body trickling: the connection is still open after 10 s", c.path)
		}
		if err == nil || !(errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")) {
			t.Fatalf("POST %s without a valid key: after the answer read %v, want EOF", c.path, err)
		}
	}
}
