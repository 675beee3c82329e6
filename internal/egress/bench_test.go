package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// benchPayload is the size of one download.
const benchPayload = 64 << 20

// BenchmarkThroughput downloads benchPayload bytes from a loopback server,
// directly and through the proxy (on its unix socket, as in production),
// alternately in the same run, and reports both rates and their ratio
// (x-direct: proxy rate / direct rate). connect and socks5 carry raw
// bytes through a tunnel; http is an absolute-URI request whose response
// the proxy parses and relays. These connect to the proxy's unix socket;
// connect-tcp and http-tcp to its TCP socket, as a sandbox's clients do
// (the proxy copies between two TCP sockets then).
func BenchmarkThroughput(b *testing.B) {
	raw := payloadServer(b, false)
	web := payloadServer(b, true)
	tp := startProxy(b, Config{AllowNonPublic: true})
	for _, c := range []struct {
		name  string
		proxy func() (net.Conn, io.Reader)
		port  string
		http  bool
	}{
		{name: "connect", port: raw, proxy: func() (net.Conn, io.Reader) {
			c, br, resp, _ := tp.connect(b, "allowed.test:"+raw)
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
			return c, br
		}},
		{name: "socks5", port: raw, proxy: func() (net.Conn, io.Reader) {
			c, br, rep := tp.socks5(b, "allowed.test", raw)
			if rep != socksOK {
				b.Fatalf("reply %#x", rep)
			}
			return c, br
		}},
		{name: "http", port: web, http: true, proxy: func() (net.Conn, io.Reader) {
			c := tp.open(b)
			return c, c
		}},
		{name: "connect-tcp", port: raw, proxy: func() (net.Conn, io.Reader) {
			c := tp.dial(b, "tcp", tp.tcp)
			br := bufio.NewReader(c)
			io.WriteString(c, "CONNECT allowed.test:"+raw+" HTTP/1.1\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(resp, err)
			}
			return c, br
		}},
		{name: "http-tcp", port: web, http: true, proxy: func() (net.Conn, io.Reader) {
			c := tp.dial(b, "tcp", tp.tcp)
			return c, c
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			dial := func() (net.Conn, io.Reader) {
				d, err := net.Dial("tcp", "127.0.0.1:"+c.port)
				if err != nil {
					b.Fatal(err)
				}
				return d, d
			}
			var direct, proxied time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				d, dr := dial()
				download(b, d, dr, c.http, "/")
				t1 := time.Now()
				target := "/"
				if c.http {
					target = "http://allowed.test:" + c.port + "/"
				}
				pc, pr := c.proxy()
				download(b, pc, pr, c.http, target)
				direct += t1.Sub(t0)
				proxied += time.Since(t1)
			}
			mb := float64(benchPayload) * float64(b.N) / (1 << 20)
			b.ReportMetric(mb/direct.Seconds(), "MB/s-direct")
			b.ReportMetric(mb/proxied.Seconds(), "MB/s-proxy")
			b.ReportMetric(direct.Seconds()/proxied.Seconds(), "x-direct")
		})
	}
}

// download reads a whole payload from r, c's reader (sending an HTTP
// request for target first when web), and closes c.
func download(b *testing.B, c net.Conn, r io.Reader, web bool, target string) {
	defer c.Close()
	if web {
		io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(r), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		r = resp.Body
	}
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, make([]byte, 256<<10))
	if err != nil || n != benchPayload {
		b.Fatalf("downloaded %d bytes: %v", n, err)
	}
}

// payloadServer serves benchPayload bytes on loopback to each connection:
// raw, or as the response to an HTTP request.
func payloadServer(b *testing.B, web bool) (port string) {
	chunk := make([]byte, 1<<20)
	return serveTCP(b, func(c net.Conn) {
		if web {
			if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(benchPayload)+"\r\n\r\n")
		}
		for sent := 0; sent < benchPayload; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
}
