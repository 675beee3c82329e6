//go:build linux

package local_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
)

// downloadSize is the payload of BenchmarkDomainProxyDownload.
const downloadSize = 64 << 20

// BenchmarkDomainProxyDownload downloads downloadSize bytes from a server
// on the host's loopback with curl: inside a DomainAllowList sandbox
// through its proxy (plain HTTP forwarding, and a CONNECT tunnel with
// -p), and on the host directly, alternately in the same run. It reports
// the rates curl measures (its time_total) and x-direct, the proxy's rate
// over the direct one.
func BenchmarkDomainProxyDownload(b *testing.B) {
	testenv.NeedTool(b, "curl", "curl")
	srv := httptest.NewServer(payloadHandler())
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	sb := openSandbox(b, local.Options{Config: local.Config{Network: netPolicy(b, false, "", "allowed.test")}})
	local.SetEgressTestHooks(sb, testHosts, true)
	ctx := context.Background()
	measure := func(out string) time.Duration { return curlTime(b, out) }
	inside := func(args string) time.Duration {
		r, err := sb.ExecuteCommand(ctx, curlArgs+args+" http://allowed.test:"+port+"/", nil, nil)
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r)
		}
		return measure(r.Stdout)
	}
	inside("") // start the sandbox
	b.ResetTimer()
	var direct, forward, tunnel time.Duration
	for i := 0; i < b.N; i++ {
		out, err := exec.Command("sh", "-c", curlArgs+"http://127.0.0.1:"+port+"/").Output()
		if err != nil {
			b.Fatal(err)
		}
		direct += measure(string(out))
		forward += inside("")
		tunnel += inside("-p")
	}
	mb := float64(downloadSize) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/direct.Seconds(), "MB/s-direct")
	b.ReportMetric(mb/forward.Seconds(), "MB/s-http")
	b.ReportMetric(mb/tunnel.Seconds(), "MB/s-connect")
	b.ReportMetric(direct.Seconds()/forward.Seconds(), "x-direct-http")
	b.ReportMetric(direct.Seconds()/tunnel.Seconds(), "x-direct-connect")
}

// payloadHandler serves downloadSize bytes.
func payloadHandler() http.Handler {
	chunk := make([]byte, 1<<20)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(downloadSize))
		for sent := 0; sent < downloadSize; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
}

// curlArgs makes curl print how long a download took and its size.
const curlArgs = "curl -sS -o /dev/null -w '%{time_total} %{size_download}' "

// curlTime returns the time of a download of downloadSize bytes, from
// what curlArgs printed.
func curlTime(b *testing.B, out string) time.Duration {
	f := strings.Fields(out)
	if len(f) != 2 || f[1] != strconv.Itoa(downloadSize) {
		b.Fatalf("curl: %q", out)
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(s * float64(time.Second))
}

// BenchmarkIdleMemoryDomainAllowList is BenchmarkIdleMemory for sandboxes
// with a DomainAllowList: 100 running idle sandboxes of one state dir, one
// command run in each, the PSS of the processes of each sandbox's pid
// namespace plus its share of the state dir's egress proxy: the one proxy
// process serves every sandbox, so its PSS divided by the number of
// sandboxes it serves (MB-PSS/sandbox). The proxy's own PSS and RSS are
// reported whole (MB-PSS/proxy, MB-RSS/proxy). It runs once whatever b.N.
func BenchmarkIdleMemoryDomainAllowList(b *testing.B) {
	const n = 100
	boxes := idleSandboxes(b, newStateDir(b), n, local.Config{Network: netPolicy(b, false, "", "example.com,*.example.org")})
	var pss int64
	proxy := local.EgressProxyPID(boxes[0])
	for _, sb := range boxes {
		for m := range procsInNS(pidNS(local.InitPID(sb))) {
			p, _ := smapsRollup(m)
			pss += p
		}
		if local.EgressProxyPID(sb) != proxy {
			b.Fatalf("%s: egress proxy %d, want the shared %d", sb.ID(), local.EgressProxyPID(sb), proxy)
		}
	}
	proxyPSS, proxyRSS := smapsRollup(proxy)
	if proxyPSS == 0 {
		b.Fatal("no egress proxy")
	}
	pss += proxyPSS
	b.ReportMetric(float64(pss)/n/1024, "MB-PSS/sandbox")
	b.ReportMetric(float64(proxyPSS)/1024, "MB-PSS/proxy")
	b.ReportMetric(float64(proxyRSS)/1024, "MB-RSS/proxy")
}
