package secretproxy

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func itoa(n int) string { return strconv.Itoa(n) }

func TestScrubReaderAcrossReads(t *testing.T) {
	sc := &scrubber{pairs: []scrubPair{{[]byte("SECRETVALUE"), []byte("<ph>"), nil}, {[]byte("KEY"), []byte("<k>"), nil}}, keep: len("SECRETVALUE") - 1}
	in := "aSECRETVALUEbKEYcSECRETVALUESECRETVALUE" + strings.Repeat("z", 100) + "SECRETVALUE"
	r := &scrubReader{sc: sc, src: io.NopCloser(iotest.OneByteReader(strings.NewReader(in))), tmp: make([]byte, 7)}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "a<ph>b<k>c<ph><ph>" + strings.Repeat("z", 100) + "<ph>"
	if string(got) != want {
		t.Fatalf("scrubbed %q, want %q", got, want)
	}
}
