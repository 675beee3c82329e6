//go:build linux

package local_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
)

// BenchmarkEgressDownload downloads downloadSize bytes with curl from an
// HTTP server in the lab's internet (netlab_test.go): inside a sandbox of
// the default network, through its link, firewall and NAT, and from the
// lab's host directly (curl under nsenter in the uplink namespace),
// alternately in the same run. It reports the rates curl measures and
// x-direct, the sandbox's rate over the direct one.
func BenchmarkEgressDownload(b *testing.B) {
	testenv.NeedTool(b, "curl", "curl")
	testenv.NeedTool(b, "nsenter", "util-linux")
	lab := newNetLab(b)
	ln := listenIn(b, lab.inet, "tcp", addrPort(labPublic4, 0))
	srv := &http.Server{Handler: payloadHandler()}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().(*net.TCPAddr).String() + "/"
	sb := lab.sandbox(b, local.Config{})
	ctx := context.Background()
	const curl = curlArgs
	b.ResetTimer()
	var direct, inside time.Duration
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("nsenter", "--net="+lab.UplinkPath, "sh", "-c", curl+url)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		direct += curlTime(b, string(out))
		r, err := sb.ExecuteCommand(ctx, curl+url, nil, nil)
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r)
		}
		inside += curlTime(b, r.Stdout)
	}
	mb := float64(downloadSize) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/direct.Seconds(), "MB/s-direct")
	b.ReportMetric(mb/inside.Seconds(), "MB/s-sandbox")
	b.ReportMetric(direct.Seconds()/inside.Seconds(), "x-direct")
}
