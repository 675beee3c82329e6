//go:build linux

package local_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// rootlessBenchHelper is the helper mode "rootless-bench": as an ordinary
// uid, HELPER_N rounds, each of New + the first command ("true") of a
// sandbox with the default network (the user-mode network), the same with
// the network blocked (loopback only), and os/exec of `true`, alternated;
// with HELPER_URL, each round also downloads it with curl inside the
// default sandbox and from this process's namespace (the sandbox's host).
// It prints "NAME NANOSECONDS" totals and "curl-NAME OUTPUT" lines.
func rootlessBenchHelper(ctx context.Context) int {
	n, err := strconv.Atoi(os.Getenv("HELPER_N"))
	if err != nil {
		fmt.Println("error: HELPER_N:", err)
		return 1
	}
	stateDir, url := os.Getenv("HELPER_STATE_DIR"), os.Getenv("HELPER_URL")
	blocked := local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}
	create := func(id string, c local.Config) (*local.Sandbox, time.Duration, error) {
		start := time.Now()
		sb, err := local.New(local.Options{ID: id, StateDir: stateDir, Config: c})
		if err != nil {
			return nil, 0, err
		}
		r, err := sb.ExecuteCommand(ctx, "true", nil, nil)
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("true exited %d", r.ExitCode)
		}
		return sb, time.Since(start), err
	}
	// The first sandbox of a state dir makes what later ones share.
	if sb, _, err := create("warm-up", local.Config{}); err != nil {
		fmt.Println("error: warm-up:", err)
		return 1
	} else if err := sb.Destroy(ctx); err != nil {
		fmt.Println("error: destroy:", err)
		return 1
	}
	var tDefault, tBlocked, tExec time.Duration
	for i := range n {
		sb, d, err := create("default-"+strconv.Itoa(i), local.Config{})
		if err != nil {
			fmt.Println("error: default network:", err)
			return 1
		}
		tDefault += d
		if url != "" {
			r, err := sb.ExecuteCommand(ctx, curlArgs+url, nil, nil)
			if err != nil || r.ExitCode != 0 {
				fmt.Println("error: curl inside:", err, r)
				sb.Destroy(ctx)
				return 1
			}
			out, err := exec.Command("sh", "-c", curlArgs+url).Output()
			if err != nil {
				fmt.Println("error: curl direct:", err)
				sb.Destroy(ctx)
				return 1
			}
			fmt.Printf("curl-inside %s\ncurl-direct %s\n", r.Stdout, out)
		}
		if err := sb.Destroy(ctx); err != nil {
			fmt.Println("error: destroy:", err)
			return 1
		}
		sb, d, err = create("blocked-"+strconv.Itoa(i), blocked)
		if err != nil {
			fmt.Println("error: blocked network:", err)
			return 1
		}
		tBlocked += d
		if err := sb.Destroy(ctx); err != nil {
			fmt.Println("error: destroy:", err)
			return 1
		}
		t0 := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			fmt.Println("error: true:", err)
			return 1
		}
		tExec += time.Since(t0)
	}
	fmt.Printf("default %d\nblocked %d\nosexec %d\n", tDefault, tBlocked, tExec)
	return 0
}

// runRootlessBench runs rootlessBenchHelper as uid 2001 in the network
// namespace netns (nil: the test's) and returns its output's lines by
// name (curl's lines, several, under "curl-inside" and "curl-direct").
func runRootlessBench(b *testing.B, netns *os.File, env ...string) map[string][]string {
	stateDir := newSharedStateDir(b, "agentbox-rootless-bench-")
	if err := os.Chown(stateDir, 2001, 2001); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append([]string{helperEnv + "=rootless-bench", "HELPER_STATE_DIR=" + stateDir, "HOME=/nonexistent", "PATH=/usr/bin:/bin", "HELPER_N=" + strconv.Itoa(b.N)}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 2001, Gid: 2001, Groups: []uint32{}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := testenv.StartUnprivileged(b, netns, cmd); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("helper as uid 2001: %v\n%s", err, out.String())
	}
	got := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = append(got[k], v)
		}
	}
	return got
}

// nsOf returns the total of name in got, in nanoseconds.
func nsOf(b *testing.B, got map[string][]string, name string) float64 {
	if len(got[name]) != 1 {
		b.Fatalf("no total %s: %v", name, got)
	}
	n, err := strconv.ParseFloat(got[name][0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkRootlessCreateToFirstCommand measures, as uid 2001 (no root),
// New + the first command of a sandbox with the default network (the
// user-mode network) and of one with the network blocked, against os/exec
// of `true`, alternated in one run: x-os-exec is the default sandbox's
// time over os/exec's, x-blocked over the blocked sandbox's (what the
// user-mode network costs at start).
func BenchmarkRootlessCreateToFirstCommand(b *testing.B) {
	testenv.NeedRoot(b, "needs root to run the benchmark as another uid")
	got := runRootlessBench(b, nil)
	def, blk, ex := nsOf(b, got, "default"), nsOf(b, got, "blocked"), nsOf(b, got, "osexec")
	b.ReportMetric(def/1e6/float64(b.N), "ms/create")
	b.ReportMetric(blk/1e6/float64(b.N), "ms/create-blocked")
	b.ReportMetric(ex/1e6/float64(b.N), "ms/os-exec")
	b.ReportMetric(def/ex, "x-os-exec")
	b.ReportMetric(def/blk, "x-blocked")
}

// BenchmarkRootlessDownload downloads downloadSize bytes with curl from an
// HTTP server in the lab's internet, as uid 2001: inside a sandbox of the
// default network (through the user-mode network) and from the lab's host
// directly, alternately in the same run. It reports the rates curl
// measures and x-direct, the sandbox's rate over the direct one.
func BenchmarkRootlessDownload(b *testing.B) {
	testenv.NeedTool(b, "curl", "curl")
	lab := newNetLab(b)
	ln := listenIn(b, lab.inet, "tcp", addrPort(labPublic4, 0))
	srv := &http.Server{Handler: payloadHandler()}
	go srv.Serve(ln)
	defer srv.Close()
	got := runRootlessBench(b, lab.uplink, "HELPER_URL=http://"+ln.Addr().(*net.TCPAddr).String()+"/")
	var direct, inside time.Duration
	for _, o := range got["curl-direct"] {
		direct += curlTime(b, o)
	}
	for _, o := range got["curl-inside"] {
		inside += curlTime(b, o)
	}
	if len(got["curl-inside"]) != b.N || len(got["curl-direct"]) != b.N {
		b.Fatalf("curl ran %d and %d times, want %d", len(got["curl-inside"]), len(got["curl-direct"]), b.N)
	}
	mb := float64(downloadSize) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/direct.Seconds(), "MB/s-direct")
	b.ReportMetric(mb/inside.Seconds(), "MB/s-sandbox")
	b.ReportMetric(direct.Seconds()/inside.Seconds(), "x-direct")
}
