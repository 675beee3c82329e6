package toolbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// piece is a run of bytes written to one stream (0 stdout, 1 stderr).
type piece struct {
	stream int
	data   []byte
}

func (p piece) String() string { return fmt.Sprintf("%d:%q", p.stream, p.data) }

// refDemux is the reference decoder: it sees the whole log at once. A full
// marker switches the stream; every other byte is data of the current
// stream, stdout at first.
func refDemux(log []byte) []piece {
	var out []piece
	cur := 0
	for i := 0; i < len(log); {
		b := log[i]
		if (b == 1 || b == 2) && i+3 <= len(log) && log[i+1] == b && log[i+2] == b {
			cur = int(b) - 1
			i += 3
			continue
		}
		out = appendPiece(out, cur, log[i:i+1])
		i++
	}
	return out
}

func appendPiece(ps []piece, stream int, p []byte) []piece {
	if len(p) == 0 {
		return ps
	}
	if n := len(ps); n > 0 && ps[n-1].stream == stream {
		ps[n-1].data = append(ps[n-1].data, p...)
		return ps
	}
	return append(ps, piece{stream, append([]byte(nil), p...)})
}

// seqWriter records the interleaving of writes to both streams.
type seqWriter struct {
	pieces *[]piece
	stream int
}

func (w seqWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, errors.New("empty write")
	}
	*w.pieces = appendPiece(*w.pieces, w.stream, p)
	return len(p), nil
}

// demuxChunks writes log to a Demuxer cut at the given offsets.
func demuxChunks(t testing.TB, log []byte, cuts []int) []piece {
	var ps []piece
	d := toolbox.NewDemuxer(seqWriter{&ps, 0}, seqWriter{&ps, 1})
	prev := 0
	for _, c := range append(cuts, len(log)) {
		if c < prev || c > len(log) {
			continue
		}
		n, err := d.Write(log[prev:c])
		if err != nil || n != c-prev {
			t.Fatalf("Write = %d, %v", n, err)
		}
		prev = c
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestDemuxCases(t *testing.T) {
	for _, tc := range []struct {
		log  string
		want []piece
	}{
		{"", nil},
		{"before\x01\x01\x01out", []piece{{0, []byte("beforeout")}}},
		{"\x02\x02\x02err\n\x01\x01\x01out\n", []piece{{1, []byte("err\n")}, {0, []byte("out\n")}}},
		{"\x01\x01", []piece{{0, []byte("\x01\x01")}}},
		{"\x02\x02\x02a\x02\x02", []piece{{1, []byte("a\x02\x02")}}},
		{"\x01\x01\x02\x02\x02x", []piece{{0, []byte("\x01\x01")}, {1, []byte("x")}}},
		{"\x01\x01\x01\x01", []piece{{0, []byte("\x01")}}},
		{"\x02\x01\x01\x01é", []piece{{0, []byte("\x02é")}}},
		{"\x01\x01\x01\x02\x02\x02\x01\x01\x01x", []piece{{0, []byte("x")}}},
	} {
		want := tc.want
		if got := refDemux([]byte(tc.log)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("reference(%q) = %v, want %v", tc.log, got, want)
		}
		// Every single cut and every pair of cuts.
		n := len(tc.log)
		for i := 0; i <= n; i++ {
			for j := i; j <= n; j++ {
				got := demuxChunks(t, []byte(tc.log), []int{i, j})
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("demux(%q) cut at %d,%d = %v, want %v", tc.log, i, j, got, want)
				}
			}
		}
	}
}

// randomLog makes logs rich in markers, partial markers and UTF-8.
func randomLog(r *rand.Rand, n int) []byte {
	atoms := [][]byte{
		{1, 1, 1}, {2, 2, 2}, {1}, {2}, {1, 1}, {2, 2}, []byte("a"), []byte("\n"),
		[]byte("é"), []byte("日本"), []byte("🙂"), {0xff}, {0},
	}
	var b []byte
	for len(b) < n {
		b = append(b, atoms[r.IntN(len(atoms))]...)
	}
	return b
}

func TestDemuxProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		log := randomLog(r, r.IntN(64))
		var cuts []int
		for k := r.IntN(6); k > 0; k-- {
			cuts = append(cuts, r.IntN(len(log)+1))
		}
		if k := len(cuts); k > 1 {
			for i := 1; i < k; i++ {
				if cuts[i] < cuts[i-1] {
					cuts[i], cuts[i-1] = cuts[i-1], cuts[i]
				}
			}
		}
		want := refDemux(log)
		got := demuxChunks(t, log, cuts)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("log %q cuts %v:\n got %v\nwant %v", log, cuts, got, want)
		}
	}
}

// TestDemuxUTF8 checks that multi-byte runes split across writes come out
// unchanged (the demuxer never decodes).
func TestDemuxUTF8(t *testing.T) {
	text := "héllo 日本語 🙂\n"
	log := []byte("\x01\x01\x01" + text + "\x02\x02\x02" + text)
	for i := 0; i <= len(log); i++ {
		var o, e bytes.Buffer
		d := toolbox.NewDemuxer(&o, &e)
		d.Write(log[:i])
		d.Write(log[i:])
		d.Close()
		if o.String() != text || e.String() != text || !utf8.Valid(o.Bytes()) {
			t.Fatalf("cut %d: %q %q", i, o.String(), e.String())
		}
	}
}

func TestDemuxErrors(t *testing.T) {
	boom := errors.New("boom")
	d := toolbox.NewDemuxer(errWriter{boom}, nil)
	if _, err := d.Write([]byte("\x02\x02\x02to nil stderr")); err != nil {
		t.Fatalf("nil writer: %v", err)
	}
	if _, err := d.Write([]byte("\x01\x01\x01x")); !errors.Is(err, boom) {
		t.Fatalf("writer error: %v", err)
	}
	if _, err := d.Write([]byte("y")); !errors.Is(err, boom) {
		t.Fatalf("sticky error: %v", err)
	}
	if err := d.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close: %v", err)
	}
	d = toolbox.NewDemuxer(io.Discard, io.Discard)
	d.Close()
	if _, err := d.Write([]byte("x")); err == nil {
		t.Fatal("write after Close succeeded")
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

func FuzzDemux(f *testing.F) {
	f.Add([]byte("\x01\x01\x01out\n\x02\x02\x02err\n"), uint8(1), uint8(3))
	f.Add([]byte("pre\x01\x01\x02\x02\x02é\x01"), uint8(4), uint8(2))
	f.Add([]byte("\x01\x01\x01\x01\x02\x02\x02\x02"), uint8(2), uint8(5))
	f.Add([]byte("日本\x02\x02\x02🙂\x01\x01"), uint8(3), uint8(1))
	f.Add([]byte{}, uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, log []byte, a, b uint8) {
		want := refDemux(log)
		if got := demuxChunks(t, log, nil); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("one write: got %v want %v", got, want)
		}
		// Cut into chunks of sizes cycling through a and b (0 → 1).
		var cuts []int
		sizes := []int{int(a%16) + 1, int(b%16) + 1}
		for pos, k := 0, 0; pos < len(log); k++ {
			pos += sizes[k%2]
			cuts = append(cuts, min(pos, len(log)))
		}
		if got := demuxChunks(t, log, cuts); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("chunks %v: got %v want %v", sizes, got, want)
		}
	})
}

// BenchmarkDemux measures demultiplexing a Daytona log of 4 KiB lines in
// 1 KiB frames, and reports the ratio of its throughput to a plain copy of
// the same frames (baseline measured in the same run).
func BenchmarkDemux(b *testing.B) {
	line := append([]byte("\x01\x01\x01"), bytes.Repeat([]byte("x"), 4093)...)
	errLine := append([]byte("\x02\x02\x02"), bytes.Repeat([]byte("y"), 4093)...)
	var log []byte
	for i := range 256 {
		if i%4 == 3 {
			log = append(log, errLine...)
		} else {
			log = append(log, line...)
		}
	}
	const frame = 1024
	run := func(b *testing.B, w io.Writer) float64 {
		b.SetBytes(int64(len(log)))
		b.ResetTimer()
		for range b.N {
			for i := 0; i < len(log); i += frame {
				w.Write(log[i:min(i+frame, len(log))])
			}
		}
		return float64(b.N) * float64(len(log)) / b.Elapsed().Seconds() / 1e6
	}
	var base float64
	b.Run("copy", func(b *testing.B) { base = run(b, &copyWriter{buf: make([]byte, frame)}) })
	b.Run("demux", func(b *testing.B) {
		out, errb := &copyWriter{buf: make([]byte, frame)}, &copyWriter{buf: make([]byte, frame)}
		mbs := run(b, toolbox.NewDemuxer(out, errb))
		if base > 0 {
			b.ReportMetric(mbs/base, "x-copy")
		}
	})
}

// copyWriter copies what it gets into a reused buffer: the baseline cost of
// touching every byte once.
type copyWriter struct{ buf []byte }

func (w *copyWriter) Write(p []byte) (int, error) {
	return copy(w.buf, p), nil
}
