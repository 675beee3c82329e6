//go:build linux

package local_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// BenchmarkSecretsRedirect measures HTTPS from inside a sandbox in the
// default network mode with a secret (its ports 80/443 redirected to
// egressd: api.test intercepted, TLS terminated, the placeholder
// replaced, upstream through its netsock process) against a sandbox in
// the same mode without secrets (no redirect: straight out through its
// link), the same lab server, alternately in one run: a 1 MiB download,
// and smallRequests small requests on one connection.
func BenchmarkSecretsRedirect(b *testing.B) {
	rl := newRedirectLab(b)
	withSecret := rl.sandbox(b, apiSecret(secretValue), rl.api.caPEM)
	without := rl.sandbox(b, nil, nil)
	// The baseline trusts what the sandbox with secrets trusts: the
	// system's bundle plus one CA (there the state dir's, here the lab
	// server's), so that both curls load a bundle of the same size.
	mustRun(b, without, "{ cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null; cat <<'EOF'\n"+string(rl.api.caPEM)+"EOF\n} > /tmp/api-ca.pem")
	timed := func(sb *local.Sandbox, extra, path string, n int) time.Duration {
		urls := strings.Repeat(" -o /dev/null https://api.test"+path, n)
		return curlTotals(b, sb, `curl -sS `+extra+` --resolve api.test:443:`+redirectAPI+` -H "Authorization: Bearer $API_KEY" -w '%{time_total}\n'`+urls)
	}
	cacert := "--cacert /tmp/api-ca.pem"
	timed(withSecret, "", "/big", 1) // warm up
	timed(without, cacert, "/big", 1)
	b.ResetTimer()
	var subst, direct, substSmall, directSmall time.Duration
	for i := 0; i < b.N; i++ {
		subst += timed(withSecret, "", "/big", 1)
		direct += timed(without, cacert, "/big", 1)
		substSmall += timed(withSecret, "", "/small", smallRequests)
		directSmall += timed(without, cacert, "/small", smallRequests)
	}
	b.StopTimer()
	mb := float64(b.N)
	b.ReportMetric(mb/subst.Seconds(), "MiB/s-redirect")
	b.ReportMetric(mb/direct.Seconds(), "MiB/s-direct")
	b.ReportMetric(direct.Seconds()/subst.Seconds(), "x-direct-1MiB")
	n := float64(b.N * smallRequests)
	b.ReportMetric(float64(substSmall.Microseconds())/n, "us/req-redirect")
	b.ReportMetric(float64(directSmall.Microseconds())/n, "us/req-direct")
	b.ReportMetric(float64((substSmall-directSmall).Microseconds())/n, "us/req-added")
}
