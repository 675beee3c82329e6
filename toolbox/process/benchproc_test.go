package process

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// Benchmarks that report memory run the daemon and the measured client in
// processes of their own (helpers: re-executions of the test binary), so
// that each one's peak RSS is its own, as for a sandbox's init and the
// program that calls ExecuteCommand.

// Environment of the daemon and rss helpers.
const (
	envWorkDir = "AGENTBOX_PROCESS_TEST_WORKDIR" // daemon: its work dir
	envRSSMode = "AGENTBOX_PROCESS_TEST_RSSMODE" // rss: "ours" or "os/exec"
	envRetain  = "AGENTBOX_PROCESS_TEST_RETAIN"  // rss: MaxRetainedBytes
)

// runDaemonHelper serves a toolbox daemon on envSocket until its stdin
// closes, after printing "ready".
func runDaemonHelper() int {
	srv, err := daemon.New(daemon.Options{WorkDir: os.Getenv(envWorkDir)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("unix", os.Getenv(envSocket))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	hs.Close()
	return 0
}

// runRSSHelper runs envCommand once, collecting its stdout (streaming it
// to io.Discard with envStream=1), through a Manager of the daemon on
// envSocket ("ours", after a warm-up command) or with os/exec, and prints
// its own peak RSS in KiB and the bytes of stdout it got.
func runRSSHelper() int {
	cmd, stream := os.Getenv(envCommand), os.Getenv(envStream) == "1"
	var n int
	switch os.Getenv(envRSSMode) {
	case "os/exec":
		c := exec.Command("sh", "-c", cmd)
		if stream {
			out, err := c.StdoutPipe()
			if err == nil {
				err = c.Start()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			k, _ := io.Copy(io.Discard, out)
			c.Wait()
			n = int(k)
		} else {
			out, err := c.Output()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			n = len(out)
		}
	default:
		client, err := toolbox.NewClient(toolbox.ClientOptions{Socket: os.Getenv(envSocket)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		m := NewManager(Options{Client: client})
		ctx := context.Background()
		if _, err := m.Execute(ctx, "true", nil, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		opts := &sandbox.ExecOptions{}
		if stream {
			opts.Stdout = io.Discard
		}
		if v := os.Getenv(envRetain); v != "" {
			opts.MaxRetainedBytes, _ = strconv.ParseInt(v, 10, 64)
		}
		r, err := m.Execute(ctx, cmd, nil, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		n = len(r.Stdout)
		if stream && opts.MaxRetainedBytes != 0 {
			n += int(r.StdoutDroppedBytes)
		}
		m.Close(ctx)
	}
	// VmHWM, not getrusage's maxrss: that one keeps the peak of the
	// memory this process was forked with (the benchmark's) across exec.
	kib, err := peakKiB(os.Getpid())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(kib, n)
	return 0
}

// peakKiB returns the peak RSS (VmHWM) of process pid in KiB.
func peakKiB(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// daemonProc is a daemon helper process.
type daemonProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	sock  string
}

// startDaemonProc starts a daemon helper and waits until it serves.
func startDaemonProc(b *testing.B) *daemonProc {
	b.Helper()
	dir := b.TempDir()
	sockDir, err := os.MkdirTemp("", "agentbox-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(sockDir) })
	d := &daemonProc{sock: filepath.Join(sockDir, "toolbox.sock")}
	d.cmd = exec.Command(os.Args[0], "-test.run=^$")
	d.cmd.Env = append(os.Environ(), envHelper+"=daemon", envSocket+"="+d.sock, envWorkDir+"="+dir)
	d.cmd.Stderr = os.Stderr
	if d.stdin, err = d.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		d.stdin.Close()
		d.cmd.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		b.Fatalf("daemon helper: %q", line)
	}
	return d
}

// resetPeak resets the daemon's peak RSS (VmHWM) to its current RSS.
func (d *daemonProc) resetPeak(b *testing.B) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", d.cmd.Process.Pid), []byte("5"), 0); err != nil {
		b.Fatalf("resetting the daemon's peak RSS: %v", err)
	}
}

// peakMiB returns the daemon's peak RSS (VmHWM) in MiB.
func (d *daemonProc) peakMiB(b *testing.B) float64 {
	kib, err := peakKiB(d.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return float64(kib) / 1024
}

// clientPeakMiB runs command once in an rss helper (mode "ours" against
// d, or "os/exec") and returns the helper's peak RSS in MiB, checking
// that it got want bytes.
func clientPeakMiB(b *testing.B, d *daemonProc, mode, command string, stream bool, retain int64, want int) float64 {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=rss", envRSSMode+"="+mode, envSocket+"="+d.sock, envCommand+"="+command)
	if stream {
		cmd.Env = append(cmd.Env, envStream+"=1")
	}
	if retain != 0 {
		cmd.Env = append(cmd.Env, envRetain+"="+strconv.FormatInt(retain, 10))
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("rss helper (%s): %v", mode, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		b.Fatalf("rss helper (%s): %q", mode, out)
	}
	kib, _ := strconv.Atoi(f[0])
	if n, _ := strconv.Atoi(f[1]); n != want {
		b.Fatalf("rss helper (%s): %d bytes of stdout, want %d", mode, n, want)
	}
	return float64(kib) / 1024
}

// outputCommands are the commands of the output benchmarks: size bytes of
// zeros or of text.
func outputCommand(kind string, size int) string {
	if kind == "zeros" {
		return fmt.Sprintf("head -c %d /dev/zero", size)
	}
	return fmt.Sprintf("yes 'a line of text, as a build prints it' | head -c %d", size)
}

// BenchmarkBuffered32MiB collects 32 MiB of stdout into the result (no
// writer: the sync exec path) against os/exec's Output of the same command,
// interleaved, with the daemon in a process of its own (goal: at least
// 0.25× the throughput). It reports the peak RSS of a client process that
// runs the command once (goal: at most 1.5× the output + 32 MiB), of
// os/exec's Output in the same situation, and of the daemon while it
// answers (goal: bounded, whatever the output).
func BenchmarkBuffered32MiB(b *testing.B) {
	benchOutput(b, 32<<20, false, 0)
}

// BenchmarkStream256MiBRetained streams 256 MiB of stdout to an io.Discard
// writer with default options, the result keeping all of it, against
// io.Copy from an os/exec pipe (goals: at least 0.4× the throughput, peak
// RSS at most the output + 64 MiB). It also reports the ratio against an
// os/exec pipe whose output is kept as well (x-os/exec-kept-throughput):
// the cost of holding 256 MiB, which the first baseline does not pay.
func BenchmarkStream256MiBRetained(b *testing.B) {
	benchOutput(b, 256<<20, true, 0)
}

func benchOutput(b *testing.B, size int, stream bool, retain int64) {
	for _, kind := range []string{"zeros", "text"} {
		b.Run(kind, func(b *testing.B) {
			command := outputCommand(kind, size)
			d := startDaemonProc(b)
			client, err := toolbox.NewClient(toolbox.ClientOptions{Socket: d.sock})
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			m := NewManager(Options{Client: client})
			defer m.Close(context.Background())
			ctx := context.Background()
			opts := &sandbox.ExecOptions{MaxRetainedBytes: retain}
			if stream {
				opts.Stdout = io.Discard
			}
			if _, err := m.Execute(ctx, "true", nil, nil); err != nil {
				b.Fatal(err)
			}
			var ours, base, kept []time.Duration
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				r, err := m.Execute(ctx, command, nil, opts)
				ours = append(ours, time.Since(start))
				if err != nil || r.ExitCode != 0 || len(r.Stdout)+int(r.StdoutDroppedBytes) != size {
					b.Fatalf("Execute: %d bytes, %v", len(r.Stdout), err)
				}
				r = nil
				b.StopTimer()
				start = time.Now()
				n := baselineOutput(b, command, stream)
				base = append(base, time.Since(start))
				if n != size {
					b.Fatalf("os/exec: %d bytes", n)
				}
				if stream {
					start = time.Now()
					if n := baselineStreamKept(b, command); n != size {
						b.Fatalf("os/exec, kept: %d bytes", n)
					}
					kept = append(kept, time.Since(start))
				}
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(sum(base))/float64(sum(ours)), "x-os/exec-throughput")
			b.ReportMetric(float64(median(base))/float64(median(ours)), "x-os/exec-throughput-median")
			b.ReportMetric(float64(size)*float64(b.N)/sum(base).Seconds()/(1<<20), "os/exec-MiB/s")
			if stream {
				b.ReportMetric(float64(sum(kept))/float64(sum(ours)), "x-os/exec-kept-throughput")
			}
			d.resetPeak(b)
			b.ReportMetric(clientPeakMiB(b, d, "ours", command, stream, retain, size), "client-peak-MiB")
			b.ReportMetric(d.peakMiB(b), "daemon-peak-MiB")
			b.ReportMetric(clientPeakMiB(b, d, "os/exec", command, stream, retain, size), "os/exec-peak-MiB")
		})
	}
}

// baselineStreamKept runs command with os/exec, copying its stdout from a
// pipe to io.Discard and keeping all of it in a bytes.Buffer, as a Go
// program that streams and keeps the output would; it returns the size
// kept.
func baselineStreamKept(b *testing.B, command string) int {
	var kept bytes.Buffer
	c := exec.Command("sh", "-c", command)
	c.Stdout = io.MultiWriter(io.Discard, &kept)
	if err := c.Run(); err != nil {
		b.Fatal(err)
	}
	return kept.Len()
}

// baselineOutput runs command with os/exec, collecting its stdout (Output)
// or copying it from a pipe to io.Discard (stream), and returns its size.
func baselineOutput(b *testing.B, command string, stream bool) int {
	c := exec.Command("sh", "-c", command)
	if !stream {
		out, err := c.Output()
		if err != nil {
			b.Fatal(err)
		}
		return len(out)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, out)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		b.Fatal(err)
	}
	return int(n)
}
