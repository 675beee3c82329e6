package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
	agentbox "github.com/agentbox-dev/agentbox/sandbox"
)

// benchLatency is the latency serve adds to every request in the
// benchmarks (its latency knob): a control plane as far away as
// Daytona's.
const benchLatency = 20 * time.Millisecond

// benchCommands is how many sequential commands a round runs.
const benchCommands = 20

// benchModes are serve's two toolboxes: its own (agentbox's extensions)
// and its Daytona-behaviour mode (Daytona's daemon, no extensions).
var benchModes = []struct {
	name    string
	daytona bool
}{{"agentbox", false}, {"daytona", true}}

// benchServe starts agentbox serve with knobs on loopback over a state
// dir whose image store has testBaseImage, and returns it and its URL.
func benchServe(b *testing.B, knobs server.Knobs) (*server.Server, string) {
	b.Helper()
	if os.Geteuid() != 0 {
		testenv.Skipf(b, "agentbox serve's sandboxes need root here (the local engine's default network)")
	}
	dir := b.TempDir()
	st, err := local.OpenImageStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	testrootfs.SaveImage(b, st, testBaseImage)
	b.Cleanup(func() { localtest.CheckNoneLeft(b, dir) })
	srv, err := server.New(server.Options{StateDir: dir, APIKeys: []string{apiKey}, Knobs: &knobs})
	if err != nil {
		b.Fatal(err)
	}
	base := serveLoopback(b, srv, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return srv.Close(ctx)
	})
	return srv, base
}

// benchEngine returns a started sandbox of agentbox's daytona engine on
// the serve at base, of testBaseImage, destroyed when b ends.
func benchEngine(b *testing.B, base, id string) *daytona.Sandbox {
	b.Helper()
	c, err := daytona.NewClient(daytona.Config{APIKey: apiKey, APIURL: base + "/api"})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := daytona.New(daytona.Options{ID: id, Snapshot: testBaseImage, Client: c, AutoStopInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			b.Errorf("destroy: %v", err)
		}
		sb.Close(ctx)
		c.Close()
	})
	ctx := context.Background()
	if _, err := sb.Start(ctx); err != nil {
		b.Fatal(err)
	}
	// The handle's first command makes its session: not measured.
	if _, err := sb.ExecuteCommand(ctx, "echo", []string{"warm"}, nil); err != nil {
		b.Fatal(err)
	}
	return sb
}

// BenchmarkMastraCommands: 20 sequential commands on a started sandbox
// through agentbox's daytona engine, against the same 20 through
// Mastra's DaytonaSandbox (@mastra/daytona, testdata/node/mastra-bench.mjs)
// on the same serve in the same run, with 20 ms added to every request;
// with serve's own toolbox and with its Daytona-behaviour mode. It
// reports each's wall time per round and their ratio (goal: ≤ 0.5).
func BenchmarkMastraCommands(b *testing.B) {
	p := findNode(b)
	if _, err := os.Stat(filepath.Join(p.dir, "node_modules", "@mastra", "daytona", "package.json")); err != nil {
		testenv.Skipf(b, "Mastra's @mastra/daytona is not installed (%v): run scripts/test.sh, or npm ci --ignore-scripts --prefix %s", err, p.dir)
	}
	for _, mode := range benchModes {
		// Once per mode: b.Run calls its function again for each b.N.
		_, base := benchServe(b, server.Knobs{Latency: benchLatency, DaytonaToolbox: mode.daytona})
		mastra := mastraRound(b, p, base, "bench-mastra-"+mode.name)
		runs := 0
		b.Run(mode.name, func(b *testing.B) {
			runs++
			sb := benchEngine(b, base, "bench-engine-"+mode.name+"-"+strconv.Itoa(runs))
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				for i := range benchCommands {
					res, err := sb.ExecuteCommand(ctx, "echo", []string{strconv.Itoa(i)}, nil)
					if err != nil || res.ExitCode != 0 || res.Stdout != strconv.Itoa(i)+"\n" {
						b.Fatalf("echo %d: %+v, %v", i, res, err)
					}
				}
			}
			round := time.Since(start) / time.Duration(b.N)
			b.StopTimer()
			b.ReportMetric(ms(round), "ms/round")
			b.ReportMetric(ms(mastra), "mastra-ms/round")
			b.ReportMetric(float64(round)/float64(mastra), "ratio")
		})
	}
}

// mastraRound runs testdata/node/mastra-bench.mjs on the serve at base and
// returns the median of its rounds' wall times.
func mastraRound(b *testing.B, p nodeProject, base, name string) time.Duration {
	b.Helper()
	stdout, err := p.runNode(b, "mastra-bench.mjs", base, "", "AGENTBOX_SANDBOX_NAME="+name, "AGENTBOX_BASE_IMAGE="+testBaseImage,
		"AGENTBOX_BENCH_ROUNDS=5", "AGENTBOX_BENCH_COMMANDS="+strconv.Itoa(benchCommands))
	lines := bytes.Split(bytes.TrimSpace(stdout), []byte("\n"))
	var rep struct {
		SDK      string    `json:"sdk"`
		RoundsMs []float64 `json:"roundsMs"`
	}
	if jerr := json.Unmarshal(lines[len(lines)-1], &rep); jerr != nil || err != nil || len(rep.RoundsMs) == 0 {
		b.Fatalf("node mastra-bench.mjs printed no report (exit: %v, decoding: %v):\n%s", err, jerr, stdout)
	}
	slices.Sort(rep.RoundsMs)
	median := rep.RoundsMs[len(rep.RoundsMs)/2]
	b.Logf("@mastra/daytona %s: rounds %v ms", rep.SDK, rep.RoundsMs)
	return time.Duration(median * float64(time.Millisecond))
}

// BenchmarkStreamingTrue: a streaming `true` (its output to a writer) on
// serve's Daytona-behaviour mode with 20 ms added to every request. It
// reports the requests a command takes and the wall time beyond their
// latency (goal: ≤ 100 ms): what waiting costs past the round trips.
func BenchmarkStreamingTrue(b *testing.B) {
	srv, base := benchServe(b, server.Knobs{Latency: benchLatency, DaytonaToolbox: true, CountRequests: true})
	sb := benchEngine(b, base, "bench-streaming")
	ctx := context.Background()
	var requests int
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		srv.ResetRequestCounts()
		var out bytes.Buffer
		start := time.Now()
		res, err := sb.ExecuteCommand(ctx, "true", nil, &agentbox.ExecOptions{Stdout: &out})
		elapsed += time.Since(start)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("true: %+v, %v", res, err)
		}
		requests += srv.RequestCounts(sb.RemoteID()).Total()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(requests)/n, "requests/op")
	b.ReportMetric(ms(elapsed-time.Duration(requests)*benchLatency)/n, "ms-beyond-latency/op")
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
