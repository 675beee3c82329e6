//go:build linux

package local_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// curlTotals runs the curl command cmd, which prints its time_total for
// each URL, in sb and returns the sum.
func curlTotals(b *testing.B, sb *local.Sandbox, cmd string) time.Duration {
	r, err := sb.ExecuteCommand(context.Background(), cmd, nil, nil)
	if err != nil || r.ExitCode != 0 {
		b.Fatal(err, r)
	}
	var d time.Duration
	for _, f := range strings.Fields(r.Stdout) {
		s, err := strconv.ParseFloat(f, 64)
		if err != nil {
			b.Fatalf("curl printed %q", r.Stdout)
		}
		d += time.Duration(s * float64(time.Second))
	}
	return d
}

// smallRequests is how many requests one curl sends, on one connection,
// in BenchmarkSecretsProxy's small-request case.
const smallRequests = 50

// BenchmarkSecretsProxy measures HTTPS from inside a DomainAllowList
// sandbox through the substituting proxy (api.test: the secret's host,
// intercepted, TLS terminated and the placeholder replaced) against the
// same server through the egress proxy's plain tunnel (evil.test: the
// same sandbox and server, not intercepted), alternately in one run: a
// 1 MiB download, and smallRequests small requests on one connection. It
// reports the rates, the ratio to the tunnel and the time the proxy adds
// per small request.
func BenchmarkSecretsProxy(b *testing.B) {
	api := newAPIServer(b)
	sb := secretsDomainSandbox(b, api)
	ca := trustAPI(b, sb, api)
	timed := func(host, path string, n int) time.Duration {
		urls := strings.Repeat(" -o /dev/null https://"+host+":"+api.port+path, n)
		return curlTotals(b, sb, `curl -sS -p --cacert `+ca+` -H "Authorization: Bearer $API_KEY" -w '%{time_total}\n'`+urls)
	}
	timed("api.test", "/big", 1) // warm up: the CA's leaf, the connections
	timed("evil.test", "/big", 1)
	b.ResetTimer()
	var subst, tunnel, substSmall, tunnelSmall time.Duration
	for i := 0; i < b.N; i++ {
		subst += timed("api.test", "/big", 1)
		tunnel += timed("evil.test", "/big", 1)
		substSmall += timed("api.test", "/small", smallRequests)
		tunnelSmall += timed("evil.test", "/small", smallRequests)
	}
	b.StopTimer()
	mb := float64(b.N)
	b.ReportMetric(mb/subst.Seconds(), "MiB/s-secrets")
	b.ReportMetric(mb/tunnel.Seconds(), "MiB/s-tunnel")
	b.ReportMetric(tunnel.Seconds()/subst.Seconds(), "x-tunnel-1MiB")
	n := float64(b.N * smallRequests)
	b.ReportMetric(float64(substSmall.Microseconds())/n, "us/req-secrets")
	b.ReportMetric(float64(tunnelSmall.Microseconds())/n, "us/req-tunnel")
	b.ReportMetric(float64((substSmall-tunnelSmall).Microseconds())/n, "us/req-added")
}
